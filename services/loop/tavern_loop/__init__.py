"""AgentTavern loop service."""
