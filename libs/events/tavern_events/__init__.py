"""AgentTavern's public event contract: models, subjects and streams."""
