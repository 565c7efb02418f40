"""Generation (DESIGN stages 1-3): prompts, few-shot retrieval, reply extraction, and the model backends (`llm/`)."""
