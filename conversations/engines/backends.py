"""The engine backends by name, each the module that builds it (imported only when selected), and
the options each one reads from a model's `options` (checked in specs.spec_problems)."""

BACKENDS = {
    "scripted": "conversations.engines.scripted",
    "llamacpp": "conversations.engines.llamacpp",
    "openai": "conversations.engines.openai",
    "vllm": "conversations.engines.vllm",
}

# The JSON types of each option a backend reads (see its build_engine); bool is never a number.
_NUMBER = (int, float)
BACKEND_OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "scripted": {
        "tokens": (int,),
        "delay_ms": _NUMBER,
        "load_s": _NUMBER,
        "fail_after": (int,),
        "echo": (bool,),
        "context_tokens": (int,),
    },
    "llamacpp": {"threads": (int,)},
    "openai": {"base_url": (str,), "api_key_env": (str,), "timeout": _NUMBER},
    "vllm": {
        "tensor_parallel_size": (int,),
        "gpu_memory_utilization": _NUMBER,
        "enforce_eager": (bool,),
        "log_requests": (bool,),
        "engine_args": (dict,),
    },
}
