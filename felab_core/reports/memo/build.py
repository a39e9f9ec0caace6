"""Building the memo: the machine's speed limit, the cache budget, the safe concurrency, the
flags to start the server with, each from felab_core.sizing and the measured rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

from felab_core.reports.memo.fits import (
    check_cache_fits,
    check_machine_memory,
    check_reading_figures,
    memory_line,
    typed_weights_note,
    weights_held,
)
from felab_core.reports.memo.model import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_LEN,
    VIDEO_BLOCK_SIZE,
    VIDEO_BLOCKS,
    VIDEO_CONVERSATIONS_AFTER,
    VIDEO_MAX_LEN,
    VIDEO_TTFT_P95_AFTER,
    VIDEO_TTFT_P95_BEFORE,
    CacheBudget,
    ConcurrencyRow,
    FlagAdvice,
    Machine,
    MachineSpec,
    Memo,
    MemoError,
    MemoInputs,
    TimingRow,
)
from felab_core.reports.memo.results import _fraction, _int, _latest, _server_rank, _when
from felab_core.reports.memo.weights import weights_read
from felab_core.sizing import capacity as cap
from felab_core.sizing import change, kv, speed_limit, vllm_log
from felab_core.sizing.errors import SizingError
from felab_core.sizing.model_family import log_model_problem
from felab_core.sizing.model_shape import resolve_shape
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    GB,
    about_text,
    binary_size_text,
    both_ways,
    decimal_text,
    parse_bandwidth,
    parse_bytes,
    size_text,
    tidy_text,
    whole_text,
)
from felab_core.text import shell_word, with_hidden_shown


def _machines(
    specs: Sequence[MachineSpec], hosts: Sequence[str], reads: speed_limit.BytesPerToken
) -> dict[str, Machine]:
    """Each host's machine and speed limit; a host with no machine would get a wrong percentage."""
    if not specs:
        raise MemoError(
            "name the machine the rows were measured on: --chip 'M4 Pro' (see `felab size chips`) "
            "or --bandwidth 273 (GB/s from the maker's spec sheet)"
        )
    by_host: dict[str | None, MachineSpec] = {}
    for spec in specs:
        if spec.host in by_host:
            who = f"host {spec.host!r}" if spec.host else "every host"
            raise MemoError(f"{who} is given two machines; give one --chip or --bandwidth each")
        if spec.host is not None and spec.host not in hosts:
            raise MemoError(
                f"no rows come from host {spec.host!r}; the CSV's hosts are {', '.join(hosts)}"
            )
        by_host[spec.host] = spec
    owner: dict[str, str | None] = {}  # host -> the spec key that covers it
    for host in hosts:
        if host in by_host:
            owner[host] = host
        elif None in by_host:
            owner[host] = None
        else:
            raise MemoError(
                f"no machine for host {host!r}: add --chip '{host}=CHIP' (or --bandwidth "
                f"'{host}=GBPS'), or leave its rows out with --host"
            )
    machines: dict[str | None, Machine] = {}
    for key, spec in by_host.items():
        covered = tuple(h for h in hosts if owner[h] == key)
        if not covered:
            continue
        chip = speed_limit.find_chip(spec.chip) if spec.chip else None
        if chip is not None:
            bw, label = chip.bytes_per_second, chip.name
        else:
            bw = parse_bandwidth(spec.bandwidth or "")
            label = f"a {tidy_text(bw / GB)} GB/s machine"
        machines[key] = Machine(covered, label, chip, speed_limit.ceiling(bw, reads, chip))
    return {host: machines[owner[host]] for host in hosts}


def _budget(
    inputs: MemoInputs, per_token: kv.KvPerToken, max_len: int, machines: Sequence[Machine]
) -> CacheBudget:
    """The cache as one Capacity, whichever way it was given; concurrency needs exactly one."""
    given = [
        name
        for name, value in (
            ("--kv-memory", inputs.kv_memory),
            ("--kv-tokens", inputs.kv_tokens),
            ("--blocks", inputs.blocks),
            ("--vllm-log", inputs.vllm_log),
        )
        if value is not None
    ]
    if len(given) != 1:
        what = "none was given" if not given else f"got {' and '.join(given)}"
        raise MemoError(
            "give the memory left for the KV cache exactly one way (" + what + "): --kv-memory "
            "16GiB (after the weights), --kv-tokens N or --blocks N from the server's log, or "
            "--vllm-log FILE (vLLM's startup log)"
        )
    bs = inputs.block_size
    dtype = per_token.key_dtype.name
    if inputs.kv_memory is not None:
        memory = (
            parse_bytes(inputs.kv_memory)
            if isinstance(inputs.kv_memory, str)
            else Fraction(inputs.kv_memory)
        )
        check_cache_fits(memory, machines)
        base = cap.capacity_from_memory(memory, per_token, bs or DEFAULT_BLOCK_SIZE, max_len)
        return CacheBudget(
            words=f"{both_ways(memory)} of cache memory",
            short=f"{binary_size_text(memory)} of cache memory",
            source=f"{both_ways(memory)} of memory for the cache, as given (--kv-memory).",
            base=base,
            memory_bytes=memory,
        )
    if inputs.kv_tokens is not None:
        base = cap.capacity_from_tokens(inputs.kv_tokens, max_len, bs, dtype)
        cache = f"a cache of {whole_text(inputs.kv_tokens)} token"
        cache += "" if inputs.kv_tokens == 1 else "s"
        return CacheBudget(
            words=cache,
            short=cache,
            source=f"{cache}, as given (--kv-tokens).",
            base=base,
            memory_bytes=None,
        )
    if inputs.blocks is not None:
        size = bs or DEFAULT_BLOCK_SIZE
        base = cap.capacity_from_blocks(inputs.blocks, size, max_len, dtype)
        return CacheBudget(
            words=f"{whole_text(inputs.blocks)} cache blocks of {size} tokens",
            short=f"{whole_text(inputs.blocks)} blocks of {size} tokens",
            source=(
                f"{whole_text(inputs.blocks)} cache blocks of {size} tokens, as given (--blocks)."
            ),
            base=base,
            memory_bytes=None,
        )
    assert inputs.vllm_log is not None
    reading = vllm_log.parse_log_file(inputs.vllm_log)
    base = reading.capacity(block_size=bs, max_len=max_len, kv_dtype=inputs.kv_dtype)
    if base.kv_dtype is None:
        base = replace(base, kv_dtype=dtype)
    return CacheBudget(
        words=f"vLLM's cache of {whole_text(base.tokens)} tokens",
        short=f"vLLM's cache of {whole_text(base.tokens)} tokens",
        source=reading.explanation,
        base=base,
        memory_bytes=reading.kv_memory_bytes,
        reading=reading,
    )


def _contexts(
    inputs: MemoInputs, shape: ModelShape, max_len: int, from_log: bool = False
) -> tuple[tuple[int, ...], list[str]]:
    """The lengths to tabulate, always with the planned one, none past the trained context."""
    for c in (*inputs.contexts, max_len):
        if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
            raise MemoError(f"context lengths are whole numbers of tokens above zero (got {c!r})")
    trained = shape.context_length
    if trained is not None and max_len > trained:  # a log's own length is said as the log's
        said = f"{inputs.vllm_log}'s max model length" if from_log else "--max-len"
        fix = "is the log of this model's server (--model)?" if from_log else "pass a --max-len"
        raise MemoError(
            f"{said} {whole_text(max_len)} is longer than {shape.name}'s trained context of "
            f"{whole_text(trained)} tokens; "
            + (fix if from_log else f"{fix} the server can be started with")
        )
    wanted = sorted({*inputs.contexts, max_len})
    notes: list[str] = []
    if trained is not None:
        dropped = [c for c in wanted if c > trained]
        if dropped:
            notes.append(
                f"Left out {', '.join(whole_text(c) for c in dropped)} tokens: longer than "
                f"{shape.name}'s trained context of {whole_text(trained)}."
            )
        wanted = [c for c in wanted if c <= trained]
    return tuple(wanted), notes


def _row_notes(rows: Sequence[TimingRow], weights: Fraction) -> list[str]:
    """Why rows might not compare: a reader should not rank servers that ran different tests."""
    notes: list[str] = []
    presets = sorted({r.preset or "(none)" for r in rows})
    if len(presets) > 1:
        notes.append(
            f"The rows ran different workloads ({', '.join(presets)}), so their speeds do not "
            "compare directly; rerun them with one preset (`felab bench ... --preset day2`)."
        )
    custom = [r.name for r in rows if r.preset.endswith("+custom")]
    if custom:
        notes.append(
            f"{', '.join(custom)} ran a preset changed by flags ('+custom'): compare with care."
        )
    users = sorted({r.users_text for r in rows})
    if len(users) > 1:
        notes.append(
            f"The rows ran with different numbers of users at once ({', '.join(users)}); "
            "per-user speed drops as users share the machine."
        )
    if any(r.check is not None for r in rows):
        mlx = (
            " (MLX keeps its own copy of the model)" if any(r.server == "mlx" for r in rows) else ""
        )
        notes.append(
            f"Each percentage divides by the speed limit for {size_text(weights, 1)} of weights "
            f"read per token; a server that loaded a different file{mlx} has its own limit, so "
            "check the model column."
        )
    for r in rows:
        if r.failed_after is not None:
            notes.append(
                f"{r.name}: the newest run, {r.failed_after:%Y-%m-%d %H:%M}, had every request "
                f"fail: shown is the one before it ({r.measured_at:%Y-%m-%d %H:%M}); check the "
                "server is up and rerun `felab bench` before quoting it."
            )
        if r.check is None:
            done = (
                f" ({r.ok} of {r.requests} requests succeeded)"
                if r.ok is not None and r.requests
                else ""
            )
            notes.append(
                f"{r.name}: the newest run has no writing speed{done}; rerun `felab bench "
                f"{shell_word(r.target or r.server, 'TARGET')}` before quoting this server."
            )
    return notes


def _flags(
    shape: ModelShape,
    per_token: kv.KvPerToken,
    per_token_fp8: kv.KvPerToken,
    budget: CacheBudget,
    max_len: int,
) -> tuple[FlagAdvice, ...]:
    """The course's three first flags, each with what it buys here and in the course's video."""
    video = cap.capacity_from_blocks(VIDEO_BLOCKS, VIDEO_BLOCK_SIZE, VIDEO_MAX_LEN, "f16")
    video_fp8 = cap.what_if(video, kv_to="fp8")
    tuned = change.compare(video.whole_requests, VIDEO_CONVERSATIONS_AFTER)
    wait = change.compare(VIDEO_TTFT_P95_BEFORE, VIDEO_TTFT_P95_AFTER)
    here = budget.at(max_len)
    v1 = (
        "On recent vLLM releases (the V1 engine) this is already on by default: check what the "
        "customer's version turns on before promising it as a win."
    )
    if per_token.key_dtype.bytes_per_element <= 1:
        fp8_numbers = (
            f"The cache is already {per_token.key_dtype.name}, 8 bits or fewer per number "
            f"({binary_size_text(per_token.bytes)} per token), so this one is spent."
        )
    else:
        mine = cap.what_if(here, kv_from=per_token.key_dtype.name, kv_to="fp8")
        fp8_numbers = (
            f"{shape.name}: {binary_size_text(per_token.bytes)} of notes per token becomes "
            f"{binary_size_text(per_token_fp8.bytes)} ({per_token_fp8.formula}). "
            f"With {budget.words}: {whole_text(here.tokens)} tokens become "
            f"{whole_text(mine.after.tokens)}, so at {whole_text(max_len)} tokens per conversation "
            f"{whole_text(here.whole_requests)} conversations at once become "
            f"{whole_text(mine.after.whole_requests)} ({tidy_text(mine.factor)} times). "
            f"In the course's video: {whole_text(video.tokens)} tokens x 2 = "
            f"{whole_text(video_fp8.after.tokens)}, from {whole_text(video.whole_requests)} to "
            f"{whole_text(video_fp8.after.whole_requests)} conversations at once."
        )
    return (
        FlagAdvice(
            title="Prefix caching",
            flag="--enable-prefix-caching",
            buys=(
                "Reuses the notes for a prompt opening that many requests share (the same "
                "instructions at the top of every chat). The shared opening is not read again for "
                "every request, which cuts the wait for the first token and the memory each "
                "conversation needs."
            ),
            numbers=(
                "In the course's Serving With vLLM video, with prompts sharing an opening, this "
                f"and the two below took p95 TTFT from {VIDEO_TTFT_P95_BEFORE} s to "
                f"{VIDEO_TTFT_P95_AFTER} s: {wait.wait_text()}."
            ),
            default_note=v1,
        ),
        FlagAdvice(
            title="Chunked prefill",
            flag="--enable-chunked-prefill",
            buys=(
                "Reads long prompts in pieces, between other people's writing steps, so one long "
                "prompt does not freeze everyone else's replies. It trades a little time to first "
                "token on the long prompt for smoother streaming for everyone."
            ),
            numbers=(
                "The video reports the three flags only together: one machine went from "
                f"{whole_text(video.whole_requests)} conversations at once to "
                f"{VIDEO_CONVERSATIONS_AFTER}, {tuned.more_text()}, with no new hardware."
            ),
            default_note=v1,
        ),
        FlagAdvice(
            title="FP8 KV cache",
            flag="--kv-cache-dtype fp8",
            buys=(
                "Stores the notes with 8 bits per number instead of 16: half the memory per token, "
                "so the same memory holds twice the tokens and about twice the conversations."
            ),
            numbers=fp8_numbers,
            default_note=""
            if per_token.key_dtype.bytes_per_element <= 1
            else "The fp8 cache is still opt-in: it must be asked for.",
        ),
    )


def _full_length_limit(
    machine: Machine, weights: Fraction, per_token: kv.KvPerToken, max_len: int
) -> str:
    """The speed limit at the planned length, the cache read with the weights: the memo had
    priced the weights alone, whatever cache --kv-tokens or --blocks planned."""
    reads = speed_limit.bytes_per_token(weights, kv=per_token, context_tokens=max_len)
    at = speed_limit.ceiling(machine.limit.bandwidth, reads, machine.chip)
    least = "at least " if machine.limit.lower_bound else ""  # a mixture's unknown share
    return (
        f"A conversation at the planned {whole_text(max_len)} tokens also reads its cache for "
        f"each token ({whole_text(max_len)} x {binary_size_text(per_token.bytes)} = "
        f"{size_text(reads.kv_cache, 2)}), so there the limit is {machine.bandwidth_text} ÷ "
        f"{size_text(reads.total, 2)} = {least}{about_text(at.tokens_per_second)} tokens per "
        f"second ({decimal_text(at.tokens_per_second, 2)})."
    )


def build_memo(
    rows: Sequence[Mapping[str, str]], inputs: MemoInputs, source: str = "results/01-latency.csv"
) -> Memo:
    """Join the latest row per server and machine with the machine, model and cache arithmetic."""
    try:
        return _build(rows, inputs, source)
    except SizingError as exc:
        raise MemoError(str(exc)) from None


def _build(rows: Sequence[Mapping[str, str]], inputs: MemoInputs, source: str) -> Memo:
    source = with_hidden_shown(source)  # a path's byte that is not UTF-8 cannot be written
    if not rows:
        raise MemoError(
            f"{source} has no timing rows: run `felab bench ollama llamacpp mlx` (or the servers "
            "you use) first, then write the memo"
        )
    if inputs.model is None and inputs.config is None and inputs.gguf is None:
        seen = sorted({r.get("model", "") for r in rows if r.get("model")})
        hint = f" (the CSV's rows name {', '.join(seen)})" if seen else ""
        raise MemoError(
            "name the model the rows ran: --model llama-3.1-8b (felab's table), --config "
            f"config.json or --gguf FILE{hint}"
        )
    if inputs.hosts:
        all_hosts = sorted({r.get("host", "") for r in rows})
        unknown = [h for h in inputs.hosts if h not in all_hosts]
        if unknown:
            raise MemoError(
                f"no rows come from host(s) {', '.join(repr(h) for h in unknown)}; the CSV's "
                "hosts are "
                f"{', '.join(all_hosts)}"
            )
        rows = [r for r in rows if r.get("host") in inputs.hosts]

    shape = resolve_shape(config=inputs.config, gguf=inputs.gguf, model=inputs.model)
    weights, weights_note = weights_read(inputs, shape)
    latest = _latest(rows, source)
    hosts = sorted({row["host"] for row, *_ in latest})
    at_most = speed_limit.share_unknown(shape)  # a mixture read whole: the limit is a floor
    reads = speed_limit.bytes_per_token(weights, weights_note=weights_note, weights_at_most=at_most)
    machines = _machines(inputs.machines, hosts, reads)

    timing: list[TimingRow] = []
    for row, stamp, older, failed in latest:
        where = f"{source}, {row['server']} on {row['host']}"
        machine = machines[row["host"]]
        tps = _fraction(row, "writing_tps_p50", where)
        check = speed_limit.check_speed(tps, machine.limit) if tps and tps > 0 else None
        timing.append(
            TimingRow(
                host=row["host"],
                server=row["server"] or row["target"],
                target=row["target"],
                server_version=row["server_version"],
                model=row["model"],
                preset=row["preset"],
                measured_at=stamp,
                concurrency=_int(row, "concurrency", where),
                rate=(row.get("rate") or "").strip(),
                requests=_int(row, "requests", where),
                ok=_int(row, "ok", where),
                writing_tps=tps if check is not None else None,
                ttft_p50_s=_fraction(row, "ttft_p50_s", where),
                ttft_p95_s=_fraction(row, "ttft_p95_s", where),
                machine=machine,
                check=check,
                older_rows=older,
                failed_after=_when(failed["timestamp"], where) if failed is not None else None,
            )
        )
    timing.sort(key=lambda r: (r.host, _server_rank(r.server)))

    per_token = kv.kv_bytes_per_token(shape, inputs.kv_dtype or "f16")
    per_token_fp8 = kv.kv_bytes_per_token(shape, "fp8")
    reading_len = None
    if inputs.vllm_log is not None and inputs.max_len is None:
        reading_len = vllm_log.parse_log_file(inputs.vllm_log).max_len
    max_len = inputs.max_len or reading_len or DEFAULT_MAX_LEN
    contexts, context_notes = _contexts(inputs, shape, max_len, reading_len is not None)
    budget = _budget(inputs, per_token, max_len, list(machines.values()))
    served = budget.reading.model if budget.reading else None  # another model's cache?
    if wrong := log_model_problem(served, shape, str(inputs.vllm_log), inputs.model_flag):
        raise MemoError(wrong)
    if budget.reading is None and budget.base.tokens < budget.base.max_len:
        length = (  # the default is said as one: it was not typed (sixteenth sweep M8)
            f"--max-len {whole_text(max_len)}"
            if inputs.max_len
            else f"{whole_text(max_len)} tokens (the default --max-len)"
        )
        raise MemoError(  # "0 conversations at once" had been written for --kv-tokens 1
            f"{budget.words} cannot hold one conversation of {length}: vLLM would refuse to "
            "start with it; give more cache, or the server's --max-model-len with --max-len"
        )
    if budget.base.kv_dtype and kv.kv_dtype(budget.base.kv_dtype) != per_token.key_dtype:
        per_token = kv.kv_bytes_per_token(shape, budget.base.kv_dtype)  # the log's own type
    check_reading_figures(budget, per_token, weights, list(machines.values()))  # each alone
    held = weights_held(inputs, shape, weights)
    typed = inputs.model_bytes is not None
    check_machine_memory(held, budget, per_token, list(machines.values()), typed=typed)
    typed_note = typed_weights_note(held, budget, per_token) if typed else None

    concurrency: list[ConcurrencyRow] = []
    for ctx in contexts:
        here = budget.at(ctx)
        fp8 = None
        if per_token.key_dtype.bytes_per_element > 1:
            fp8 = cap.what_if(here, kv_from=per_token.key_dtype.name, kv_to="fp8").after
        concurrency.append(
            ConcurrencyRow(
                ctx, kv.kv_memory(ctx, per_token), kv.kv_memory(ctx, per_token_fp8), here, fp8
            )
        )
    what_ifs = cap.standard_what_ifs(
        budget.at(max_len), kv_from=per_token.key_dtype.name, kv_to="fp8"
    )
    distinct: list[Machine] = []
    for m in machines.values():
        if m not in distinct:
            distinct.append(m)
    return Memo(
        source=source,
        rows_read=len(rows),
        machines=tuple(distinct),
        shape=shape,
        weights=weights,
        weights_note=weights_note,
        rows=tuple(timing),
        row_notes=tuple(_row_notes(timing, weights)),
        per_token=per_token,
        per_token_fp8=per_token_fp8,
        max_len=max_len,
        budget=budget,
        concurrency=tuple(concurrency),
        what_ifs=what_ifs,
        flags=_flags(shape, per_token, per_token_fp8, budget, max_len),
        context_notes=tuple(context_notes),
        memory_line=memory_line(held, budget, per_token, typed=typed),
        memory_notes=(typed_note,) if typed_note else (),
        limit_notes=tuple(_full_length_limit(m, weights, per_token, max_len) for m in distinct),
    )
