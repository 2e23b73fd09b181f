"""compose.yaml holds together with the code: every variable it hands chatsite's containers is one
chatsite reads (its settings, or the image's entrypoint and healthcheck), every service it names
exists, every variable it interpolates is explained in deploy/compose.env.example, and nginx's
upstream is the web service. The files are only read: no Docker, no database."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
ENV_EXAMPLE = ROOT / "deploy" / "compose.env.example"
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
NGINX_CONF = ROOT / "deploy" / "nginx" / "compose.conf"
# The services that run the image, and so get chatsite's settings.
CHATSITE_SERVICES = ("web", "migrate")
# chatsite/env.py's typed readers: every setting goes through one of them.
READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_json_object"}
ENV_CALLS = READERS | {"environ.get", "environ.setdefault", "getenv"}
SHELL_VARIABLE = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)")
INTERPOLATION = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)([:?-]*)")
PLACEHOLDER = re.compile(r"\$\{[^}]*\}")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment:`, a mapping or a list of NAME=value."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {name: str(value) for name, value in raw.items()}


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value
        prefix = f"{owner.attr}." if isinstance(owner, ast.Attribute) else ""
        return prefix + func.attr  # environ.get, os.getenv -> getenv
    return ""


def variables_read_in(path: Path) -> set[str]:
    """Names passed as a literal to env_*(), os.environ.get(), os.getenv() or os.environ[...]."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args and _call_name(node) in ENV_CALLS:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "environ":
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def variables_chatsite_reads() -> set[str]:
    sources = [
        *ROOT.glob("chatsite/*.py"),
        *ROOT.glob("conversations/**/*.py"),
        *ROOT.glob("deploy/*.py"),  # the image's healthcheck
    ]
    names = set().union(*(variables_read_in(path) for path in sources))
    return names | set(SHELL_VARIABLE.findall(ENTRYPOINT.read_text()))


def test_the_scan_finds_settings_entrypoint_and_healthcheck_variables() -> None:
    found = variables_chatsite_reads()
    for name in ("SECRET_KEY", "DATABASE_URL", "CHAT_ENGINE", "PROMETHEUS_MULTIPROC_DIR"):
        assert name in found
    assert {"CHAT_MIGRATE_AT_START", "WEB_CONCURRENCY", "PORT"} <= found


@pytest.mark.parametrize("name", CHATSITE_SERVICES)
def test_every_variable_a_chatsite_service_gets_is_one_chatsite_reads(name: str) -> None:
    passed = set(environment(compose()["services"][name]))
    unknown = passed - variables_chatsite_reads()
    assert not unknown, f"{name} passes variables nothing reads (a typo?): {sorted(unknown)}"


def test_every_service_it_names_exists() -> None:
    services = compose()["services"]
    named: dict[str, set[str]] = {}
    for name, service in services.items():
        depends = service.get("depends_on") or []
        named[name] = set(depends)  # a list of names or a mapping by name
        for value in environment(service).values():
            if "://" in value:  # a URL's host is a service: db, redis, vllm
                named[name].add(urlsplit(PLACEHOLDER.sub("x", value)).hostname or "")
    named["nginx"] |= set(re.findall(r"^\s*server\s+([\w.-]+):\d+", NGINX_CONF.read_text(), re.M))
    missing = {
        name: sorted(refs - set(services)) for name, refs in named.items() if refs - set(services)
    }
    assert not missing, f"services named but not defined: {missing}"


def test_nginx_proxies_to_the_port_web_listens_on() -> None:
    web = compose()["services"]["web"]
    upstreams = re.findall(r"^\s*server\s+web:(\d+)", NGINX_CONF.read_text(), re.M)
    assert upstreams and set(upstreams) <= {str(port) for port in web["expose"]}
    assert "PORT" not in environment(web), "the entrypoint's default port (8000) is the one exposed"


def test_the_files_it_mounts_and_builds_from_exist() -> None:
    services = compose()["services"]
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), volume
        if "build" in service:
            assert (ROOT / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
    for include in re.findall(r"include\s+/etc/nginx/chatsite/([\w.-]+);", NGINX_CONF.read_text()):
        assert (NGINX_CONF.parent / include).is_file(), include


def test_every_interpolated_variable_is_in_the_env_example_and_no_other() -> None:
    used = {name for name, _ in INTERPOLATION.findall(COMPOSE.read_text())}
    required = {name for name, how in INTERPOLATION.findall(COMPOSE.read_text()) if "?" in how}
    example = ENV_EXAMPLE.read_text()
    listed = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", example, re.M))
    set_there = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, re.M))
    assert used - listed == set(), "compose.yaml uses variables the example does not explain"
    assert listed - used == set(), "the example lists variables compose.yaml does not use"
    assert required <= set_there, "a required variable is commented out in the example"
