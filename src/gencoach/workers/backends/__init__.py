"""LLM backends for worker jobs: OpenAI-compatible servers and in-process Python functions.

```python
async with make_backend("coach", settings.backends["coach"], redis) as backend:
    answer = await backend.ask(messages, FailureDiagnosisAnswer)
```
"""

from gencoach.workers.backends.backend import Backend, reask_prompt
from gencoach.workers.backends.chat import Answer, ChatMessage, Completion, Exchange, Usage
from gencoach.workers.backends.concurrency import RedisSemaphore
from gencoach.workers.backends.factory import make_backend
from gencoach.workers.backends.openai import OpenAIBackend
from gencoach.workers.backends.python import PythonBackend
from gencoach.workers.backends.schemas import response_format

__all__ = [
    "Answer",
    "Backend",
    "ChatMessage",
    "Completion",
    "Exchange",
    "OpenAIBackend",
    "PythonBackend",
    "RedisSemaphore",
    "Usage",
    "make_backend",
    "reask_prompt",
    "response_format",
]
