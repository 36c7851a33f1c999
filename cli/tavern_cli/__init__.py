"""The `tavern` command: run, inspect and operate AgentTavern."""
