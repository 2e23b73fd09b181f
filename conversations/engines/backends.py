"""The engine backends by name, each the module that builds it (imported only when selected)."""

BACKENDS = {
    "scripted": "conversations.engines.scripted",
    "llamacpp": "conversations.engines.llamacpp",
    "openai": "conversations.engines.openai",
    "vllm": "conversations.engines.vllm",
}
