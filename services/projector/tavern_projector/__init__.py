"""AgentTavern projector service."""
