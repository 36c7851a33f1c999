"""AgentTavern consolidator service."""
