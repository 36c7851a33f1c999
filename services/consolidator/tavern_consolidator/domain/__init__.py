"""The consolidator's pure rules: no IO, no clock, no random ids (all passed in)."""
