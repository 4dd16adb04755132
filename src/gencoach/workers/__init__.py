"""The worker side of gencoach: RQ job functions and the LLM backends they call."""
