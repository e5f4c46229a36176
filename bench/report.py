"""The table `make bench` prints."""

from __future__ import annotations

from typing import Any


def fmt_cpu(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))


def print_table(r: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []

    def add(name: str, value: str, target: str = "") -> None:
        rows.append((name, value, target))

    _headline(r, add)
    _flow(r, add)
    for label, f in r.get("ingestion", {}).items():
        flowing = "deliveries flowing" if label.startswith("live") else "no worker running"
        add(
            f"Ingestion POST /api/v1/events [{label}, {flowing}]",
            f"{f['rate']:.0f} ev/s  p50 {f['p50_ms']} ms  p99 {f['p99_ms']} ms",
        )
    hello, django = r.get("gunicorn_hello"), r.get("django_trivial")
    iso = next((f for k, f in r.get("ingestion", {}).items() if k.startswith("isolated")), None)
    if hello:
        add("gunicorn ceiling (trivial WSGI app)", f"{hello['rate']:.0f} req/s")
    if django:
        add("Django trivial route (JSON 404, no DB)", f"{django['rate']:.0f} req/s")
    if iso and hello and django:
        share, of_django = iso["rate"] / hello["rate"], iso["rate"] / django["rate"]
        add("Ingestion / gunicorn ceiling", f"{share:.1%} (of Django route: {of_django:.1%})")
    if "raw_ceiling" in r:
        add("Raw ceiling: urllib3 16 thr -> receiver", f"{r['raw_ceiling']['rate']} req/s")
    aio = r.get("aiohttp_ceiling", {}).get("rate")
    aio_uv = r.get("aiohttp_ceiling", {}).get("rate_on_uvloop")
    if aio:
        add("aiohttp ceiling: one process -> receiver", f"{aio} req/s (uvloop: {aio_uv} req/s)")
    for label, f in r.get("delivery_backlog", {}).items():
        add(
            f"Delivery, backlog drain [{label}]",
            f"{f['deliveries_per_s_first_to_last']} del/s ({f['ratio_to_raw_ceiling']:.0%} of raw"
            f"{_share(f['deliveries_per_s_first_to_last'], aio, 'aiohttp')}"
            f"{_share(f['deliveries_per_s_first_to_last'], aio_uv, 'aiohttp on uvloop')})"
            f"  {f['unique_seen']}/{f['accepted']} in {f['seconds_first_to_last']} s"
            f"{'' if f['complete'] else ' (time cap hit)'}  dup {f['duplicates']}",
            ">= 3500/s, >= 30% of aiohttp (1w: >= 25%)",
        )
    ordering = r.get("ordering")
    if ordering:
        keyed, unkeyed = ordering["keyed"], ordering["unkeyed"]
        duplicates = keyed["received"] - keyed["unique"]
        add(
            f"Ordering: one endpoint's backlog, {keyed['keys']} keys vs none",
            f"{keyed['deliveries_per_s']} vs {unkeyed['deliveries_per_s']} del/s "
            f"({ordering['keyed_share_of_unkeyed']:.0%})  dup {duplicates}",
            "keyed >= 60% of unkeyed",
        )
    for label, f in r.get("delivery_live", {}).items():
        tail = f["seconds_last_accept_to_last_receipt"]
        add(
            f"Delivery, live end to end [{label}]",
            f"{f['deliveries_per_s_first_accept_to_last_receipt']} del/s "
            f"(ingest {f['ingestion_rate']:.0f}/s; tail {tail} s)"
            f"{'' if f['complete'] else ' (time cap hit)'}"
            f"  dup {f['duplicates']} missing {f['missing']}",
        )
    lat = r.get("latency")
    if lat:
        add(
            f"Latency 202->receiver @ {lat['rate_offered']:.0f} ev/s [{lat['workers']}w]",
            f"p50 {lat['p50_ms']} ms  p99 {lat['p99_ms']} ms  max {lat['max_ms']} ms"
            f"  (API kept up with {lat['achieved_rate']:.0f} ev/s; API p50 {lat['api_p50_ms']} ms)",
            "p50 < 50, p99 < 500",
        )
    for kind in ("delivery_backlog", "delivery_live"):
        for label, f in r.get(kind, {}).items():
            mem = "  ".join(
                f"{name} {m['start_mb']:.0f}->{m['peak_mb']:.0f}" for name, m in f["rss"].items()
            )
            add(f"RSS MiB start->peak [{kind.split('_')[1]} {label}]", mem)
    _filters(r.get("filters"), add)
    other = []
    phases = [(f"ingest[{k}]", f) for k, f in r.get("ingestion", {}).items()]
    phases += [(f"wrk-ingest[{k}]", f) for k, f in r.get("ingestion_wrk", {}).items()]
    for kind in ("delivery_backlog", "delivery_live"):
        phases += [(f"{kind.split('_')[1]}[{k}]", f) for k, f in r.get(kind, {}).items()]
    phases += [(f"isolation[{f['label']}]", f) for f in r.get("isolation", {}).get("runs", [])]
    if "rate_limit" in r:
        phases.append(("rate-limit", r["rate_limit"]))
    for name, f in phases:
        other.append(f"{name} {f['cpu_percent_of_one_core'].get('OTHER-processes', 0):.0f}")
    add("CPU % used by OTHER processes on the box", ", ".join(other), "~0 for clean figures")
    width = max(len(name) for name, _, _ in rows)
    vwidth = max(len(value) for _, value, _ in rows)
    print()
    print(f"{'measure':<{width}}  {'result':<{vwidth}}  target")
    print("-" * (width + vwidth + 24))
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<{vwidth}}  {target}")
    print()


def _filters(f: dict[str, Any] | None, add: Any) -> None:
    """bench/filters.py: in-process, the web process's CPU per event without HTTP."""
    if not f:
        return
    add(f"Filter on a {f['event_bytes']} B event", f"{f['filter_us']} µs (median)", "<= 20 µs")
    add("Schema validation of it (enforce)", f"{f['schema_validation_us']} µs", "<= 50 µs")
    for kind, g in f["ingestion"].items():
        add(
            f"Ingestion CPU/event, 100 filtered endpoints vs none [{kind}]",
            f"{g['ratio_all_match']:.2f}x all match, {g['ratio_half_match']:.2f}x half match "
            f"({g['cpu_us_per_event_without_filters']} µs without filters)",
            "<= 1.10x",
        )


def _headline(r: dict[str, Any], add: Any) -> None:
    """What a user cares about first, each next to its ceiling from the same run."""
    for label, f in r.get("live_wrk", {}).items():
        share = f["share_of_backlog_drain"]
        add(
            f"LIVE end to end, {_what(label)} [{f['workers']}w]",
            f"{f['deliveries_per_s']:.0f} del/s"
            f"{f' ({share:.0%} of backlog drain)' if share else ''}"
            f"  ingest {f['ingestion']['events_per_s']:.0f} ev/s"
            f"{'' if f['complete'] else ' (time cap hit)'}"
            f"  dup {f['duplicates']} missing {f['missing']}",
            ">= 1200 del/s" if label.startswith("batch") else ">= 600 del/s",
        )
    ceiling = r.get("gunicorn_hello_wrk", {}).get("rate")
    for label, f in r.get("ingestion_wrk", {}).items():
        share = f.get("share_of_gunicorn_ceiling")
        add(
            f"INGESTION isolated, {_what(label)} (wrk)",
            f"{f['events_per_s']:.0f} ev/s  p50 {f['p50_ms']} ms  p99 {f['p99_ms']} ms"
            f"  {f['web_cpu_ms_per_event']} ms web CPU/ev"
            f"  workers {'/'.join(f'{w:.0f}' for w in f.get('gunicorn_workers_cpu_percent', []))}%"
            f"{f'  {share:.1%} of gunicorn ceiling' if share else ''}"
            f"  wrk CPU {f['load_generator_cpu_percent']}%",
            ">= 8000 ev/s" if label.startswith("batch") else ">= 1000 ev/s, >= 12%",
        )
    if ceiling:
        add("gunicorn ceiling under wrk (trivial WSGI app)", f"{ceiling:.0f} req/s")
    paced = r.get("ingestion_paced")
    if paced:
        add(
            f"INGESTION at {paced['rate_offered']:.0f} ev/s (paced)",
            f"p50 {paced['p50_ms']} ms  p99 {paced['p99_ms']} ms  errors {paced['errors']}",
            "p99 <= 50 ms",
        )


def _flow(r: dict[str, Any], add: Any) -> None:
    """Flow control: a hanging endpoint's cost to healthy ones, and rate-limit precision."""
    iso = r.get("isolation")
    if iso:
        runs = iso["runs"]
        capped = "" if all(run["complete"] for run in runs) else " (time cap hit)"
        dup = sum(run["duplicates"] for run in runs)
        missing = sum(run["missing"] for run in runs)
        for name, where in (("", "on another port"), ("_same_host", "same host:port")):
            if iso[f"ratio{name}"] is None:
                continue
            rates = ", ".join(
                f"{run['label']} {run['deliveries_per_s']:.0f}"
                f" ({run['worker_cpu_ms_per_delivery']:.2f} ms CPU)"
                for run in runs
                if run["label"].startswith(("without", "with_same_host" if name else "with-"))
            )
            add(
                f"ISOLATION: 1 hanging endpoint in {iso['healthy_endpoints'] + 1}, {where}"
                f" [{iso['workers']}w]",
                f"ratio {iso[f'ratio{name}']}  (from launch {iso[f'ratio{name}_from_launch']};"
                f" first receipt {iso[f'seconds_launch_to_first{name}']:.1f} s vs "
                f"{iso['seconds_launch_to_first_without']:.1f} s; healthy del/s (worker CPU per"
                f" delivery): {rates};"
                f" {iso['healthy_endpoints']} x {iso['events']} events, timeout "
                f"{iso['delivery_timeout_s']:g} s){capped}  dup {dup} missing {missing}",
                ">= 0.95" if not name else "",
            )
    rl = r.get("rate_limit")
    if rl:
        limit = rl["rate_limit"]
        add(
            f"RATE LIMIT {limit}/s at the receiver [{rl['workers']}w]",
            f"max {rl['max_in_1s_window']} in any 1 s window ({rl['windows_over_limit']} over)"
            f"  mean {rl['mean_rate']}/s "
            f"({rl['mean_rate_share_of_limit']:.0%} of limit)  gaps p1 {rl['gap_p1_ms']} p50 "
            f"{rl['gap_p50_ms']} p99 {rl['gap_p99_ms']} min {rl['gap_min_ms']} ms"
            f" (1/rate {rl['interval_ms']})"
            f"  {rl['unique_seen']}/{rl['accepted']}{'' if rl['complete'] else ' (time cap hit)'}"
            f"  dup {rl['duplicates']}",
            f"<= {limit} in any 1 s, evenly spaced",
        )
    share = r.get("tenant_share")
    if share:
        for key in ("1", "0.5"):
            run = share[key]
            add(
                f"TENANT SHARE {key}: quiet tenant beside 10 slow endpoints [1w]",
                f"first attempts p50 {run['p50_ms']} ms  p99 {run['p99_ms']} ms "
                f"({run['quiet_seen']}/{run['quiet_events']} seen; the slow tenant held at most "
                f"{run['slow_most_open']} places)",
                "p99 <= 2000 ms" if key == "0.5" else "(no share: for comparison)",
            )
    oauth = r.get("oauth")
    if oauth:
        fetches = ", ".join(f"{e['fetches']}" for e in oauth["endpoints"].values())
        lifetimes = ", ".join(f"{e.get('lifetimes_elapsed')}" for e in oauth["endpoints"].values())
        add(
            f"OAUTH2 token fetches @ {oauth['offered_events_per_s']:g} ev/s [{oauth['workers']}w]",
            f"{fetches} fetches per endpoint in {lifetimes} lifetimes of "
            f"{oauth['effective_lifetime_s']} s; {oauth['deliveries_per_s_during_load']} del/s; "
            f"wrong bearers {oauth['webhooks_with_wrong_or_no_bearer']}  dup "
            f"{oauth['duplicates']} missing {oauth['missing']}"
            f"{'' if oauth['target_met'] else '  NOT MET'}",
            "<= 1 per lifetime + the first, per process",
        )


def _what(label: str) -> str:
    return f"batches of {label[5:]}" if label.startswith("batch") else "single POSTs"


def _share(rate: float, ceiling: float | None, name: str) -> str:
    return f", {rate / ceiling:.0%} of {name}" if ceiling else ""
