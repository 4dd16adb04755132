"""The reference agent's defaults, importable without the agent itself (for option defaults)."""

DEFAULT_LLM_ENDPOINT = "http://127.0.0.1:11434/v1/chat/completions"
DEFAULT_AGENT_ID = "gencoach-reference"
