"""Pure rules of the agent loop: no IO, no clock, no random ids."""
