"""The report: targets, a table for the terminal, the JSON file and the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.latency import REFERENCE

# The flood the target is about (bench/flood.py): sockets sending frames as fast as they can.
FRAME_FLOOD = "frame flood"

DEFINITIONS = {
    "ttft_overhead_ms": "client receipt of the first message.delta minus the scripted engine's "
    "time.time() as it emitted the first token (read from the engine's record afterwards)",
    "client_ttft_ms": "client receipt of the first message.delta minus the client sending the message",
    "cancel_latency_ms": "the engine's own stop confirmation (message.cancel_confirmed_at) minus the "
    "client sending the cancel frame",
    "server_cancel_latency_ms": "the same, from the cancel reaching chatsite (the row's cancel_latency_ms)",
    "tokens_after_cancel": "tokens the engine emitted after the client sent the cancel frame",
    "gateway ttft_overhead_ms": "the same for a streamed /v1/chat/completions call: the first "
    "chunk with text at the client minus the engine's emission of the first token",
    "gateway cancel_latency_ms": "the engine's stop confirmation (the row's cancel_confirmed_at) "
    "minus the client closing the stream, for replies saved cancelled by client_disconnect",
    "delivery ratio": "tokens / (client receipt of the last delta - engine emission of the first token), "
    "divided by the same for the engine iterated alone in the bench process",
    "gap_excess_ms": "time between consecutive delta frames a client received inside the window, minus "
    "the engine's pace",
    "server_cpu_s_per_1000_tokens": "user+system CPU of the daphne processes during the window per "
    "1,000 tokens the clients received in it (Redis and PostgreSQL not included)",
    "bytes_per_socket": "growth of the daphne processes' RSS per idle open socket",
    "model ratio": "decode tokens/s measured at the client through chatsite over the same for "
    "the engine's llama.cpp binding alone (greedy, same prompt, same context and threads)",
}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(name: str, target: str, value: Any, met: bool | None) -> None:
        rows.append({"name": name, "target": target, "value": value, "met": met})

    latency = results.get("latency", {})
    idle_same = {k: v for k, v in latency.items() if "same process" in k and k.endswith("idle")}
    for condition, data in idle_same.items():
        ttft = data["ttft_overhead_ms"]
        if ttft.get("n"):
            add(
                f"TTFT overhead ({condition})",
                "p50 <= 5 ms, p99 <= 20 ms",
                f"p50 {ttft['p50']} ms, p99 {ttft['p99']} ms",
                ttft["p50"] <= 5 and ttft["p99"] <= 20,
            )
    for condition, data in latency.items():
        if REFERENCE in condition:
            continue  # the floor, not chatsite
        cancel, after = data["cancel_latency_ms"], data["tokens_after_cancel"]
        limit = 40 if "across" in condition else 20
        failed = data.get("samples_failed", 0)
        if not cancel.get("n") and not failed:
            continue
        if failed:
            add(
                f"cancel latency ({condition})",
                f"p99 <= {limit} ms, <= 2 tokens after",
                f"{failed} of {failed + cancel.get('n', 0)} samples failed (server saturated)",
                False,
            )
            continue
        add(
            f"cancel latency ({condition})",
            f"p99 <= {limit} ms, <= 2 tokens after",
            f"p99 {cancel['p99']} ms, max {after['max']:g} tokens after",
            cancel["p99"] <= limit and after["max"] <= 2,
        )
    for name, data in results.get("delivery", {}).items():
        if data.get("ratio") is not None:
            add(f"delivery ratio ({name})", ">= 0.9", data["ratio"], data["ratio"] >= 0.9)
    for name, data in results.get("concurrency", {}).items():
        best = data.get("largest_n_p99_gap_under_100ms")
        add(
            f"streams at {1000 / data['pace_ms']:g} tokens/s with p99 gap <= 100 ms ({name})",
            ">= 1000",
            best if best is not None else f"< {data['smallest_n_tested']}",
            best is not None and best >= 1000,
        )
    for name, data in results.get("memory", {}).items():
        per = data.get("bytes_per_socket")
        if per is not None:
            add(
                f"memory per idle socket ({name})",
                "< 100 KB",
                f"{per / 1024:.1f} KB",
                per < 100 * 1024,
            )
    for name, data in results.get("sends", {}).items():
        engine = data["send_to_engine_ms"]
        if engine.get("n"):
            add(
                f"{data['sends']} sends at once, send to the engine ({name})",
                "p99 <= 500 ms, every send started",
                f"p50 {engine['p50']} ms, p99 {engine['p99']} ms, {data['started']} started",
                engine["p99"] <= 500 and data["started"] == data["sends"],
            )
    for name, data in results.get("flood", {}).items():
        quiet = data["runs"]["quiet"]["client_ttft_ms"]
        flooded = data["runs"][FRAME_FLOOD]["client_ttft_ms"]
        if quiet.get("n") and flooded.get("n"):
            add(
                f"client TTFT while another user floods frames ({name})",
                "p50 and p95 within 20 ms of the quiet run",
                f"p50 {quiet['p50']} -> {flooded['p50']} ms, p95 {quiet['p95']} -> {flooded['p95']} ms",
                flooded["p50"] <= quiet["p50"] + 20 and flooded["p95"] <= quiet["p95"] + 20,
            )
    model = results.get("model", {})
    if "decode_tokens_per_s" in model:
        ratio = model["decode_tokens_per_s"]["ratio"]
        add(
            "embedded model through chatsite / alone (decode)",
            ">= 0.95",
            ratio,
            ratio is not None and ratio >= 0.95,
        )
    return rows


def table(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        f"chatsite bench ({meta['mode']}, {meta.get('duration_s', '?')} s) on {meta['machine']}",
        f"load average at start {meta['load_average_at_start']} (other work competes for the cores)",
        "",
    ]
    latency = results.get("latency", {})
    if latency:
        width = max(len(c) for c in latency) + 2
        lines.append(
            f"{'Latency, ms (p50 / p95 / p99)':<{width}}  {'TTFT overhead':<24}{'cancel latency':<24}"
            "tokens after cancel (max)  failed samples"
        )
        for condition, data in latency.items():
            after = data["tokens_after_cancel"].get("max", "-")
            lines.append(
                f"  {condition:<{width - 2}}  {_ppp(data['ttft_overhead_ms']):<24}"
                f"{_ppp(data['cancel_latency_ms']):<24}{after!s:<27}{data.get('samples_failed', 0)}"
            )
        lines += _reference_ratios(latency)
    for name, data in results.get("gateway", {}).items():
        ours, socket = data["gateway"], data["socket"]
        after = ours["tokens_after_close"].get("max", "-")
        lines += [
            "",
            f"Gateway (/v1/chat/completions, streamed) on {name} ({data['setup']}), "
            "ms p50 / p95 / p99",
            f"  TTFT overhead: gateway {_ppp(ours['ttft_overhead_ms'])}, chat socket "
            f"{_ppp(socket['ttft_overhead_ms'])}; gateway minus socket (p50) "
            f"{data['ttft_overhead_over_socket_p50_ms']}",
            f"  cancel latency, stream closed to engine stopped: {_ppp(ours['cancel_latency_ms'])} "
            f"(socket's Stop {_ppp(socket['cancel_latency_ms'])}), tokens after close (max) "
            f"{after}, not cancelled {ours['samples_not_cancelled']}, failed "
            f"{ours['samples_failed']}",
        ]
    for name, data in results.get("delivery", {}).items():
        lines.append(
            f"\nDelivery ({name}): {data['chatsite_tokens_per_s']:,} tok/s at the client vs "
            f"{data['engine_alone_tokens_per_s']:,} tok/s from the engine alone: ratio "
            f"{data['ratio']} ({data['frames_per_reply']} frames per reply)"
        )
    for name, data in results.get("concurrency", {}).items():
        lines += [
            "",
            f"Concurrency on {name} ({data['setup']}), engine pace {data['pace_ms']:g} ms, "
            f"{data['window_s']:g} s window",
            "  streams  gap beyond pace p50 / p99 ms  tokens/s (expected)  CPU s per 1k tokens"
            "  server CPU  client CPU  peak RSS MB",
        ]
        for point in data["points"]:
            gap = point["gap_excess_ms"]
            gaps = f"{gap.get('p50', '-')} / {gap.get('p99', '-')}"
            rate = f"{point['tokens_per_s']:g} ({point['expected_tokens_per_s']:g})"
            lines.append(
                f"  {point['streams']:>7}  {gaps:<28}  {rate:<19}  "
                f"{point['server_cpu_s_per_1000_tokens']!s:<19}  {point['server_cpu_utilisation']:<10}  "
                f"{point['client_cpu_utilisation']:<10}  {point['peak_rss_mb']}"
            )
        lines.append(f"  largest N with p99 gap <= 100 ms: {data['largest_n_p99_gap_under_100ms']}")
        for point in data["points"]:
            floor = point.get("reference")
            ours, base = (
                point["server_cpu_s_per_1000_tokens"],
                (floor or {}).get("server_cpu_s_per_1000_tokens"),
            )
            if ours and base:
                gap = floor["gap_excess_ms"]
                lines.append(
                    f"  {point['streams']} streams, {REFERENCE}: {base} CPU s per 1k tokens "
                    f"(chatsite {ours / base:.1f}x), gap p50 / p99 {gap.get('p50', '-')} / "
                    f"{gap.get('p99', '-')} ms, {floor['tokens_per_s']:g} tokens/s"
                )
        profiled = [
            p for p in data["points"] if (p.get("profile_of_first_server") or {}).get("samples")
        ]
        if profiled:
            where = profiled[-1]["profile_of_first_server"]
            lines.append(
                f"  py-spy, first server at {profiled[-1]['streams']} streams "
                f"({where['samples']} samples holding the GIL): chatsite code on the stack / hottest"
            )
            pairs = zip(
                where["chatsite_inclusive_percent"][:8], where["self_percent"][:8], strict=False
            )
            lines += [f"    {a[1]:5.1f}% {a[0]:<58} {b[1]:5.1f}% {b[0]}" for a, b in pairs]
    for name, data in results.get("memory", {}).items():
        lines.append(
            f"\nIdle sockets on {name}: {data['sockets']} open, {data['bytes_per_socket'] / 1024:.1f} KB "
            f"each (daphne RSS {data['rss_before_mb']} -> {data['rss_after_mb']} MB)"
        )
    for name, data in results.get("sends", {}).items():
        lines += [
            "",
            f"{data['sends']} sends at the same moment on {name} ({data['setup']}; "
            f"{data['started']} started), ms p50 / p95 / p99 / max",
            f"  send to the request reaching the engine  {_ppp(data['send_to_engine_ms'])}"
            f" / {data['send_to_engine_ms'].get('max', '-')}",
            f"  send to the first token at the client    {_ppp(data['send_to_first_token_ms'])}"
            f" / {data['send_to_first_token_ms'].get('max', '-')}",
        ]
        if crowd := data.get("one_token_calls"):
            lines.append(
                f"  {crowd['calls']} /v1 calls at once by one token ({crowd['started']} started), "
                f"call to the engine  {_ppp(crowd['call_to_engine_ms'])}"
                f" / {crowd['call_to_engine_ms'].get('max', '-')}"
                + (f"; errors: {', '.join(crowd['errors'])}" if crowd["errors"] else "")
            )
    for name, data in results.get("flood", {}).items():
        lines += [
            "",
            f"Another user while one user floods on {name} ({data['setup']}, default limits; "
            f"{data['sockets']} flooding sockets sending Stop frames as fast as they can)",
            f"  {'':<36}client TTFT ms          cancel latency ms       server CPU  flood",
        ]
        for label, run in data["runs"].items():
            flood = run.get("flood")
            what = (
                f"{flood['frames_sent']:,} frames sent, {flood['opened']} sockets opened, "
                f"{flood['refused_at_open']} refused at open, {flood['closed_by_server']} closed"
                if flood
                else "-"
            )
            lines.append(
                f"  {label:<36}{_ppp(run['client_ttft_ms']):<24}"
                f"{_ppp(run['cancel_latency_ms']):<24}{run['server_cpu_utilisation']:<12}{what}"
            )
    model = results.get("model", {})
    if "decode_tokens_per_s" in model:
        d, e = model["decode_tokens_per_s"], model["end_to_end_tokens_per_s"]
        lines.append(
            f"\nEmbedded model: decode {d['chatsite']} tok/s through chatsite vs {d['alone']} "
            f"alone (ratio {d['ratio']}); end to end {e['chatsite']} vs {e['alone']} (ratio {e['ratio']})"
        )
    lines += ["", "Targets"]
    for row in results["targets"]:
        mark = {True: "met", False: "MISSED", None: "-"}[row["met"]]
        lines.append(f"  [{mark:^6}] {row['name']}: {row['value']} (target {row['target']})")
    for note in results.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _reference_ratios(latency: dict[str, Any]) -> list[str]:
    """Each idle chatsite condition's p50s over its setup's reference relay's."""
    lines = []
    for condition, data in latency.items():
        setup = condition.split(",", 1)[0]
        floor = latency.get(f"{setup}, {REFERENCE}, idle")
        if REFERENCE in condition or not condition.endswith("idle") or floor is None:
            continue
        ratios = []
        for key, label in (("ttft_overhead_ms", "TTFT overhead"), ("cancel_latency_ms", "cancel")):
            ours, base = data[key].get("p50"), floor[key].get("p50")
            if ours is not None and base:
                ratios.append(f"{label} {ours / base:.1f}x ({ours} vs {base} ms)")
        if ratios:
            lines.append(f"  {condition} / {REFERENCE} (p50): " + ", ".join(ratios))
    return lines


def _ppp(s: dict[str, Any]) -> str:
    return f"{s['p50']} / {s['p95']} / {s['p99']}" if s.get("n") else "-"


def write_json(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")


def plots(results: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    written = []
    latency = results.get("latency", {})
    if latency:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
        for ax, key, title in (
            (axes[0], "ttft_overhead_ms", "TTFT overhead"),
            (axes[1], "cancel_latency_ms", "Cancel latency"),
        ):
            for condition, data in latency.items():
                values = np.sort(np.asarray(data["raw"][key]))
                if values.size:
                    ax.step(
                        values,
                        np.arange(1, values.size + 1) / values.size,
                        where="post",
                        label=condition,
                    )
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("ms (log scale)")
            ax.set_ylabel("fraction of samples")
            ax.set_title(f"{title} (cumulative distribution)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(folder / "latency.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    concurrency = results.get("concurrency", {})
    if concurrency:
        fig, (gap_ax, cpu_ax) = plt.subplots(1, 2, figsize=(13, 4.8))
        for index, (name, data) in enumerate(concurrency.items()):
            color = f"C{index}"
            points = [p for p in data["points"] if p["gap_excess_ms"].get("n")]
            n = [p["streams"] for p in points]
            # A log axis needs positive values: gaps at or under the pace show as 0.1 ms.
            for key, style in (("p50", "o--"), ("p99", "s-")):
                values = [max(0.1, p["gap_excess_ms"][key]) for p in points]
                gap_ax.plot(n, values, style, color=color, label=f"{name} {key}")
            cpu = [p["server_cpu_s_per_1000_tokens"] for p in points]
            cpu_ax.plot(n, cpu, "o-", color=color, label=name)
        gap_ax.axhline(100, color="red", linestyle=":", linewidth=1, label="100 ms")
        gap_ax.set_yscale("log")
        cpu_ax.set_yscale("log")
        gap_ax.set_xlabel("concurrent streams")
        gap_ax.set_ylabel("gap between frames beyond the pace (ms)")
        gap_ax.set_title("Frame gaps against N")
        cpu_ax.set_xlabel("concurrent streams")
        cpu_ax.set_ylabel("server CPU seconds per 1,000 delivered tokens")
        cpu_ax.set_title("Server CPU against N")
        for ax in (gap_ax, cpu_ax):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(folder / "concurrency.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
