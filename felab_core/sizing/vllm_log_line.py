"""One line of a vLLM log: the KV-cache facts it holds, each checked as vLLM prints it.

Apart from vllm_log.py, which gathers a whole log's lines into one reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from felab_core.sizing.capacity import MAX_BLOCK_SIZE
from felab_core.sizing.errors import SizingError
from felab_core.sizing.units import GB, MAX_TOKENS, GiB, as_fraction

#: A count as vLLM prints it (8234 or 8,234); a fraction, an exponent or a misplaced comma
#: is matched whole, so that "1e309" or "8,2340" is refused (by _int) rather than read as its
#: first digits (8,234).
_NUM = r"(\d+(?:,\d+)*(?:\.\d+)?(?:[eE][+-]?\d+)?)"
#: The most any count in a startup log can be (blocks, tokens): past it the log is damaged.
_MOST_IN_LOG = 10 * MAX_TOKENS
_TOKENS_RE = re.compile(rf"\b([A-Z]{{2,4}}(?: \+ host)?) KV cache size: {_NUM} tokens")
#: The figure is taken as any word before the x, so an edited one (1e5x) is refused with its
#: line rather than the line called missing.
_CONC_RE = re.compile(rf"Maximum concurrency for {_NUM} tokens per request: ([\w.+-]+?)x")
_BLOCKS_RE = re.compile(rf"#\s*([A-Za-z]+) blocks:?\s*{_NUM}(?:,\s*#\s*CPU blocks:?\s*{_NUM})?")
#: The first "# X blocks:" of a line, whatever follows: "# GPU blocks: -1, # CPU blocks: 1966"
#: had been read as a cache of the 1,966 CPU swap blocks.
_BLOCKS_LABEL_RE = re.compile(r"#\s*([A-Za-z]+) blocks:\s*")
_BLOCK_SIZE_RES = (
    re.compile(r"\bblock[_ -]size['\"]?\s*[=:]\s*(\d+)"),
    re.compile(r"\bblock size\s+(\d+)\s+tokens"),
)
_MAXLEN_RES = (
    re.compile(r"\bmax_seq_len=(\d+)"),
    re.compile(r"['\"]max_model_len['\"]\s*:\s*(\d+)"),
    re.compile(r"Using max model len (\d+)"),
    re.compile(r"--max-model-len[ =](\d+)"),
)
_MAXLEN_GATES = ("max_seq_len=", "max_model_len", "max model len", "--max-model-len")
_KV_DTYPE_RE = re.compile(r"\bkv_cache_dtype=([\w]+)")
#: The model a startup serves: its engine config's model='...' (V0 and V1 alike), the newer
#: "non-default args: {'model': '...'}", or served_model_name=... .
_MODEL_RES = (
    re.compile(r"\bmodel='([^']{1,300})'"),
    re.compile(r"['\"]model['\"]\s*:\s*['\"]([^'\"]{1,300})['\"]"),
    re.compile(r"\bserved_model_name=\[?'?([^,\s'\]]{1,300})"),
)
_MODEL_DTYPE_RE = re.compile(r"\bdtype=torch\.(\w+)")
_KV_MEMORY_RES = (
    re.compile(r"Available KV cache memory: ([\d.]+) (GiB|GB)"),
    re.compile(r"reserved for KV Cache is ([\d.]+) ?(GiB|GB)"),
)
_WEIGHTS_RES = (
    re.compile(r"Loading model weights took ([\d.]+) ?(GiB|GB)"),
    re.compile(r"Model loading took ([\d.]+) ?(GiB|GB)"),
    re.compile(r"model weights ([\d.]+) ?(GiB|GB)"),
)
_VERSION_RES = (
    re.compile(r"vLLM API server version ([\w.+-]+)"),
    re.compile(r"Initializing an? (?:V\d )?LLM engine \(v([\w.+-]+)\)"),
    re.compile(r"\bversion (\d+\.\d+\.\d+[\w.+-]*)"),
)

#: The words one of the patterns above needs (their gates in read_line): other lines are
#: skipped unread.
LINE_WORDS = (
    "KV cache size:", "Maximum concurrency for ", "block", "kv_cache_dtype=", "dtype=torch.",
    "KV cache memory", "KV Cache is", "weights", "loading took", "version", "LLM engine",
    "dcp_world_size", "parallel_size", *_MAXLEN_GATES,
)  # fmt: skip


def _int(text: str) -> int:
    """A count from the log, or a SizingError: vLLM writes whole numbers of sensible size."""
    if not re.fullmatch(r"\d+(?:,\d{3})*", text) or int(text.replace(",", "")) > _MOST_IN_LOG:
        raise SizingError(
            f"the log says {text[:40]} where vLLM writes a count (a whole number up to "
            f"{_MOST_IN_LOG:,}): the log was edited or damaged; give the figures with "
            "--blocks/--tokens"
        )
    return int(text.replace(",", ""))


def _length(text: str) -> int:
    """A max model length from the log: a count of at least one token, at most felab's bound."""
    value = _int(text)
    if not 1 <= value <= MAX_TOKENS:
        raise SizingError(
            f"the log gives a max model length of {text[:40]} tokens, and vLLM serves 1 to "
            f"{MAX_TOKENS:,}: the log was edited or damaged; give --max-len"
        )
    return value


def _concurrency(text: str) -> Fraction:
    """vLLM's printed 'Maximum concurrency ... X.XXx' figure, no more than a log's counts can be
    (99,999,999,999,999,999,999,999.00x had been shown as vLLM's word)."""
    if not re.fullmatch(r"\d+(?:\.\d+)?", text):
        raise SizingError(
            f"the concurrency line says {text[:40]!r}x where vLLM prints a number such as "
            "12.50x: the log was edited or damaged"
        )
    value = as_fraction(text)
    if value > _MOST_IN_LOG:
        raise SizingError(
            f"the concurrency line says {text[:40]}x, more requests than any cache holds (at "
            f"most {_MOST_IN_LOG:,}): the log was edited or damaged; give the figures with "
            "--blocks/--tokens and --max-len"
        )
    return value


def _block_size(text: str) -> int:
    value = _int(text)
    if value > MAX_BLOCK_SIZE:
        raise SizingError(
            f"the log gives a block size of {text[:40]} tokens, and vLLM's blocks hold at most "
            f"{MAX_BLOCK_SIZE:,}: the log was edited or damaged; give --block-size"
        )
    return value


def printed_slack(text: str, unit: str) -> Fraction:
    """Half a unit of the last digit printed ('0.01 GiB' is 0.005 GiB either way)."""
    places = len(text.partition(".")[2])
    return Fraction(GiB if unit == "GiB" else GB, 2 * 10**places)


def _size(value: str, unit: str) -> Fraction:
    return as_fraction(value) * (GiB if unit == "GiB" else GB)


@dataclass
class LogLine:
    """What one log line says (most say nothing)."""

    tokens: tuple[str, int] | None = None
    conc: tuple[int, Fraction] | None = None
    blocks: tuple[str, int, int | None, bool] | None = None
    block_size: int | None = None
    max_len: int | None = None
    kv_dtype: str | None = None
    model_dtype: str | None = None
    kv_memory: Fraction | None = None
    kv_memory_slack: Fraction = Fraction(0)
    weights: Fraction | None = None
    version: str | None = None
    dcp: int | None = None
    gpus: int | None = None  # tensor x pipeline parallel: the GPUs one copy is spread over
    model: str | None = None  # the model the server was started with, as the log names it


_PARALLEL_RE = re.compile(r"\b(tensor|pipeline)_parallel_size['\"]?\s*[=:]\s*(\d+)")
_DCP_RE = re.compile(r"by the dcp_world_size (\d+)")


def _first(patterns: tuple[re.Pattern[str], ...], line: str) -> re.Match[str] | None:
    for pattern in patterns:
        m = pattern.search(line)
        if m:
            return m
    return None


def _search(pattern: re.Pattern[str], line: str, gate: str) -> re.Match[str] | None:
    """The pattern's match, looked for only in a line that holds its words (`gate`): a quick
    substring test spares the regular expressions most lines (a 150 MB log of 64 KiB lines
    each holding "lock" had run every pattern over every byte, past 30 s)."""
    return pattern.search(line) if gate in line else None


def read_line(line: str) -> LogLine:
    """One line's KV-cache facts; a SizingError when a fact is there but cannot be so."""
    found = LogLine()
    m_tokens = _search(_TOKENS_RE, line, "KV cache size:")
    m_conc = _search(_CONC_RE, line, "Maximum concurrency for ")
    if m_tokens:
        found.tokens = (m_tokens.group(1), _int(m_tokens.group(2)))
    if m_conc:
        found.conc = (_length(m_conc.group(1)), _concurrency(m_conc.group(2)))
    m_blocks = _search(_BLOCKS_RE, line, " blocks")
    label = _search(_BLOCKS_LABEL_RE, line, " blocks:")
    if label and (m_blocks is None or label.start() < m_blocks.start()):
        figure = line[label.end() :].split(",")[0].split()
        _int(figure[0] if figure else "nothing")  # a count would have matched: refused here
    if m_blocks:
        colon = ":" in line[m_blocks.start() : m_blocks.end()]
        cpu = _int(m_blocks.group(3)) if m_blocks.group(3) else None
        found.blocks = (m_blocks.group(1), _int(m_blocks.group(2)), cpu, colon)
    for pattern, gate in zip(_BLOCK_SIZE_RES, ("block", "block size"), strict=True):
        m = _search(pattern, line, gate)  # the last pattern that matches wins, as before
        if m and _int(m.group(1)) > 0:
            found.block_size = _block_size(m.group(1))
    for pattern, gate in zip(_MAXLEN_RES, _MAXLEN_GATES, strict=True):
        m = _search(pattern, line, gate)
        if m:
            found.max_len = _length(m.group(1))
    m = _first(_MODEL_RES, line) if "model" in line else None
    found.model = m.group(1) if m and m.group(1) not in ("None", "") else None
    m = _search(_KV_DTYPE_RE, line, "kv_cache_dtype=")
    found.kv_dtype = m.group(1) if m else None
    m = _search(_MODEL_DTYPE_RE, line, "dtype=torch.")
    found.model_dtype = m.group(1) if m else None
    m = _first(_KV_MEMORY_RES, line) if "KV cache memory" in line or "KV Cache is" in line else None
    found.kv_memory = _size(m.group(1), m.group(2)) if m else None
    if m:
        found.kv_memory_slack = printed_slack(m.group(1), m.group(2))
    if "parallel_size" in line:
        sizes = {kind: _int(n) for kind, n in _PARALLEL_RE.findall(line)}
        if sizes and all(1 <= n <= 1024 for n in sizes.values()):
            found.gpus = sizes.get("tensor", 1) * sizes.get("pipeline", 1)
    m = _search(_DCP_RE, line, "dcp_world_size")
    found.dcp = _int(m.group(1)) or None if m else None
    m = _first(_WEIGHTS_RES, line) if "weights" in line or "loading took" in line else None
    found.weights = _size(m.group(1), m.group(2)) if m else None
    m = _first(_VERSION_RES, line) if "version" in line or "LLM engine" in line else None
    found.version = m.group(1) if m else None
    return found


_DTYPE_BYTES = {"auto": 2, "float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4}


def _dtype_size(value: str) -> str | int:
    """The bytes a number of the cache takes, as far as a contradiction goes (fp8 kinds alike)."""
    return 1 if value.startswith("fp8") else _DTYPE_BYTES.get(value, value)


class OneStartup:
    """The block size and cache type one startup gives (the lines since the last KV-cache line):
    two that differ before the same cache are refused, naming both lines (block_size=16 then
    32 before one '# GPU blocks' had used 32 without a word). A restart may change them: a
    KV-cache line ends a startup."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.seen: dict[str, tuple[int, str, str | int]] = {}

    def add(self, number: int, found: LogLine) -> None:
        for what, value in (("block_size", found.block_size), ("kv_cache_dtype", found.kv_dtype)):
            if value is None:
                continue
            key = value if isinstance(value, int) else _dtype_size(value)
            before = self.seen.get(what)
            if before is not None and before[2] != key:
                raise SizingError(
                    f"{self.source} gives {what}={before[1]} on line {before[0]:,} and "
                    f"{what}={value} on line {number:,}, before one cache: the log was edited "
                    "or mixes two servers; give one server's startup log, or the figures with "
                    "--tokens (or --blocks), --block-size and --kv-dtype"
                )
            self.seen[what] = (number, str(value), key)
        if found.tokens is not None or found.blocks is not None:
            self.seen.clear()


def check_memory_figures(
    source: str, device: str | None, figures: tuple[Fraction | None, Fraction | None]
) -> None:
    """Refuse weights or cache memory past what the largest accelerator in felab's table comes
    with: 'Model loading took 9999 GiB' had been quoted as 10,736.34 GB on one GPU. A CPU
    server's memory is not bounded here."""
    if device is not None and device.upper() == "CPU":
        return
    from felab_core.sizing.speed_limit import CHIPS  # the chip table, read only here

    biggest = max(
        (c for c in CHIPS if not c.family.startswith("Apple")), key=lambda c: c.memory_bytes
    )
    for what, value in zip(("weights took", "cache has"), figures, strict=True):
        if value is not None and value > biggest.memory_bytes:
            raise SizingError(
                f"{source} says the {what} {float(value / GB):,.2f} GB of one {device or 'GPU'}'s "
                f"memory, more than the largest in felab's table comes with ({biggest.name}, "
                f"{biggest.memory}): the log was edited or damaged; give the figures with "
                "--tokens (or --blocks) and --max-len"
            )
