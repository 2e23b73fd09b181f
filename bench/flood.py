"""Another user's time to first token and Stop while one user floods the same process.

The flooder sends Stop frames as fast as each socket can, on more sockets than the server lets
one user open, opening a new socket whenever the server closes one. The servers run with
chatsite's default per-socket limits (the other scenarios raise them for their fast clients), and
the sampler paces its replies as a person would, inside those limits. The same samples are taken
before the flood and during it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import latency
from bench.clients import Worker
from bench.config import Config
from bench.report import FRAME_FLOOD
from bench.server import Servers, Setup, running

# More than CHAT_SOCKETS_PER_USER's default (30): the rest are refused when they open.
FLOOD_SOCKETS = 40
# Two frames a sample (send, Stop) and this pause keep one socket under the default 2 frames/s.
SAMPLE_PAUSE_S = 1.0
# Whether and how soon the flooder opens a new socket after one is closed or refused: never (the
# frame flood the limits are for), after a second, and as fast as a script can (a connection flood:
# each refused handshake still costs the process, which only a proxy's per-address limits stop).
FLOODS = {
    FRAME_FLOOD: None,
    "frame flood, reopening after 1 s": 1.0,
    "frame and connection flood": 0.01,
}


def measure(cfg: Config, setup: Setup, folder: Path) -> dict[str, Any]:
    env = {
        "CHAT_ENGINE": "scripted",
        "CHAT_SCRIPTED_TOKENS": "1000000",
        "CHAT_SCRIPTED_DELAY_MS": str(cfg.pace_ms),
        "CHAT_MAX_TOKENS": "1000000",
        **cfg.server_env,
    }
    workdir = folder / f"work-{setup.name}-flood"
    servers = Servers(setup, workdir, cfg.base_port, env, 9, default_socket_limits=True)
    sampler, flooder = Worker(), Worker()
    results: dict[str, Any] = {"setup": setup.describe(), "sockets": FLOOD_SOCKETS, "runs": {}}
    try:
        with running(servers):
            cookie = servers.login()
            flood_cookie, (flood_conversation,) = servers.another_user("flooder", 1)
            ports = (servers.ports[0], servers.ports[0])
            latency.take_samples(cfg, servers, sampler, cookie, ports, 0, 2, 0, SAMPLE_PAUSE_S)

            def sample(seed: int) -> dict[str, Any]:
                cpu, began = servers.cpu_seconds(), time.monotonic()
                raw = latency.take_samples(
                    cfg, servers, sampler, cookie, ports, 3, cfg.samples, seed, SAMPLE_PAUSE_S
                )
                used = (servers.cpu_seconds() - cpu) / (time.monotonic() - began)
                return {**latency.summarize(raw), "server_cpu_utilisation": round(used, 2)}

            results["runs"]["quiet"] = sample(1)
            for seed, (name, reopen_after_s) in enumerate(FLOODS.items(), start=2):
                flood_s = 3 + cfg.samples * (SAMPLE_PAUSE_S + 1.0)
                flooder.send(
                    "flood",
                    port=ports[0],
                    conversation_id=flood_conversation,
                    cookie=flood_cookie,
                    sockets=FLOOD_SOCKETS,
                    duration_s=flood_s,
                    reopen_after_s=reopen_after_s,
                )
                time.sleep(0.2)  # sampling starts as the flood does: its first burst is measured
                run = sample(seed)
                run["flood"] = {**flooder.result(timeout=flood_s + 120), "duration_s": flood_s}
                results["runs"][name] = run
                servers.wait_idle()
    finally:
        sampler.close()
        flooder.close()
    return results
