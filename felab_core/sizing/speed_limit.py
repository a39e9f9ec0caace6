"""The speed limit: one conversation can never write faster than memory can be read.

To write one token, the machine reads every weight the token uses once (for a mixture-of-experts
model, only the active experts), plus the KV cache of the conversation so far. So a single
stream's writing speed is at most bandwidth ÷ bytes read per token. A measured or typed speed is
shown as a share of that ceiling; a speed above it is physically impossible, and the likely cause
is named.

Long because the bandwidth table (every chip with its published figure and source) lives here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from fractions import Fraction

from felab_core.sizing.errors import SizingError
from felab_core.sizing.kv import KvPerToken
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    GB,
    MIN_WEIGHTS_BYTES,
    TB,
    about_text,
    both_ways,
    decimal_size_text,
    decimal_text,
    require_positive,
    size_text,
    tidy_text,
    whole_text,
)
from felab_core.text import echo_of


@dataclass(frozen=True)
class Chip:
    """One row of the bandwidth table, with where its number was published."""

    name: str
    family: str
    bandwidth_gb_s: Fraction
    memory: str
    source: str
    aliases: tuple[str, ...] = ()

    @property
    def bytes_per_second(self) -> Fraction:
        return self.bandwidth_gb_s * GB

    @property
    def memory_bytes(self) -> Fraction:
        """The most memory this chip ships with (the table's "up to 24 GB", "80 GB HBM3")."""
        found = re.search(r"(\d+(?:\.\d+)?) GB", self.memory)
        assert found is not None, self.memory  # every row of the table names its memory
        return Fraction(found.group(1)) * GB


def _chip(
    name: str, family: str, gb_s: str, memory: str, source: str, aliases: tuple[str, ...] = ()
) -> Chip:
    return Chip(name, family, Fraction(gb_s), memory, source, aliases)


#: Weights beyond this are a unit slip, not a model: a 2-trillion-parameter model at 16 bits
#: is 4 TB, so 50 TB leaves room for what comes next and still catches 99999999TB.
MAX_WEIGHTS_BYTES = 50 * TB

_APPLE = "Apple's published tech specs for Macs with this chip (memory bandwidth)"
_NV = "NVIDIA's product datasheet"
_NVC = "NVIDIA's GeForce specifications page (memory bandwidth)"
_AMD = "AMD's Instinct product page and datasheet (peak memory bandwidth)"

CHIPS: tuple[Chip, ...] = (
    _chip("M1", "Apple M-series", "68.25", "up to 16 GB", _APPLE),
    _chip("M1 Pro", "Apple M-series", "200", "up to 32 GB", _APPLE),
    _chip(
        "M1 Max",
        "Apple M-series",
        "400",
        "up to 64 GB",
        f"{_APPLE}; the LPDDR5 arithmetic gives 409.6, a figure also quoted",
    ),
    _chip("M1 Ultra", "Apple M-series", "800", "up to 128 GB", _APPLE),
    _chip("M2", "Apple M-series", "100", "up to 24 GB", _APPLE),
    _chip("M2 Pro", "Apple M-series", "200", "up to 32 GB", _APPLE),
    _chip("M2 Max", "Apple M-series", "400", "up to 96 GB", _APPLE),
    _chip("M2 Ultra", "Apple M-series", "800", "up to 192 GB", _APPLE),
    _chip("M3", "Apple M-series", "100", "up to 24 GB", _APPLE),
    _chip("M3 Pro", "Apple M-series", "150", "up to 36 GB", _APPLE),
    _chip(
        "M3 Max (14-core CPU)",
        "Apple M-series",
        "300",
        "up to 96 GB",
        _APPLE,
        ("M3 Max 30-core GPU",),
    ),
    _chip(
        "M3 Max (16-core CPU)",
        "Apple M-series",
        "400",
        "up to 128 GB",
        _APPLE,
        ("M3 Max 40-core GPU",),
    ),
    _chip("M3 Ultra", "Apple M-series", "819", "up to 512 GB", _APPLE),
    _chip("M4", "Apple M-series", "120", "up to 32 GB", _APPLE),
    _chip(
        "M4 Pro", "Apple M-series", "273", "up to 64 GB", f"{_APPLE}; the course's Day 1 sample Mac"
    ),
    _chip(
        "M4 Max (14-core CPU)",
        "Apple M-series",
        "410",
        "up to 36 GB",
        _APPLE,
        ("M4 Max 32-core GPU",),
    ),
    _chip(
        "M4 Max (16-core CPU)",
        "Apple M-series",
        "546",
        "up to 128 GB",
        _APPLE,
        ("M4 Max 40-core GPU",),
    ),
    _chip("M5", "Apple M-series", "153", "up to 32 GB", _APPLE),
    _chip(
        "DGX Spark (GB10)",
        "NVIDIA DGX Spark",
        "273",
        "128 GB LPDDR5x, shared by CPU and GPU",
        "NVIDIA's DGX Spark specifications",
        ("DGX Spark", "GB10", "Spark"),
    ),
    _chip("V100 SXM2 32GB", "NVIDIA data center", "900", "32 GB HBM2", _NV, ("V100",)),
    _chip("T4", "NVIDIA data center", "320", "16 GB GDDR6", _NV),
    _chip("A10", "NVIDIA data center", "600", "24 GB GDDR6", _NV, ("A10G",)),
    _chip("L4", "NVIDIA data center", "300", "24 GB GDDR6", _NV),
    _chip("L40S", "NVIDIA data center", "864", "48 GB GDDR6", _NV, ("L40",)),
    _chip("A100 40GB SXM", "NVIDIA data center", "1555", "40 GB HBM2", _NV, ("A100 40GB",)),
    _chip("A100 80GB SXM", "NVIDIA data center", "2039", "80 GB HBM2e", _NV),
    _chip("A100 80GB PCIe", "NVIDIA data center", "1935", "80 GB HBM2e", _NV),
    _chip("H100 SXM", "NVIDIA data center", "3350", "80 GB HBM3", _NV),
    _chip("H100 PCIe", "NVIDIA data center", "2000", "80 GB HBM2e", _NV),
    _chip("H100 NVL", "NVIDIA data center", "3900", "94 GB HBM3", _NV),
    _chip("H200", "NVIDIA data center", "4800", "141 GB HBM3e", _NV, ("H200 SXM", "H200 NVL")),
    _chip(
        "B200",
        "NVIDIA data center",
        "8000",
        "180 GB HBM3e (per GPU, as listed in HGX B200)",
        _NV,
        ("HGX B200",),
    ),
    # AMD Instinct: peak memory bandwidth and HBM as AMD's product pages and datasheets give
    # them (amd.com/en/products/accelerators/instinct/mi200/mi250x.html, .../mi300/mi300x.html,
    # .../mi300/mi325x.html, .../mi350/mi355x.html). The MI250X's 3.2768 TB/s is its
    # datasheet's peak (the product page rounds it to 3.2 TB/s) over two dies that software
    # sees as two GPUs, each with half: one conversation on one of them gets 1,638.4 GB/s.
    _chip(
        "MI250X",
        "AMD Instinct",
        "3276.8",
        "128 GB HBM2e: two GPUs of 64 GB and 1,638.4 GB/s each",
        _AMD,
        ("Instinct MI250X",),
    ),
    _chip("MI300X", "AMD Instinct", "5300", "192 GB HBM3", _AMD, ("Instinct MI300X",)),
    _chip("MI325X", "AMD Instinct", "6000", "256 GB HBM3E", _AMD, ("Instinct MI325X",)),
    _chip("MI355X", "AMD Instinct", "8000", "288 GB HBM3E", _AMD, ("Instinct MI355X",)),
    _chip("RTX 3090", "NVIDIA consumer", "936", "24 GB GDDR6X", _NVC, ("3090",)),
    _chip("RTX 3090 Ti", "NVIDIA consumer", "1008", "24 GB GDDR6X", _NVC),
    _chip("RTX 4070", "NVIDIA consumer", "504", "12 GB GDDR6X", _NVC),
    _chip("RTX 4080", "NVIDIA consumer", "716.8", "16 GB GDDR6X", _NVC),
    _chip("RTX 4090", "NVIDIA consumer", "1008", "24 GB GDDR6X", _NVC, ("4090",)),
    _chip("RTX 5070", "NVIDIA consumer", "672", "12 GB GDDR7", _NVC),
    _chip("RTX 5070 Ti", "NVIDIA consumer", "896", "16 GB GDDR7", _NVC),
    _chip("RTX 5080", "NVIDIA consumer", "960", "16 GB GDDR7", _NVC),
    _chip("RTX 5090", "NVIDIA consumer", "1792", "32 GB GDDR7", _NVC, ("5090",)),
    _chip("RTX 6000 Ada", "NVIDIA workstation", "960", "48 GB GDDR6", _NV),
    _chip(
        "RTX PRO 6000 Blackwell",
        "NVIDIA workstation",
        "1792",
        "96 GB GDDR7",
        _NV,
        ("RTX PRO 6000",),
    ),
)


def _key(name: str) -> str:
    """A name as looked up: no spaces, dashes or brackets, no maker ('AMD Instinct MI300X')."""
    key = re.sub(r"[\s_\-()]+", "", name.lower())
    for maker in ("apple", "nvidia", "amd", "instinct"):
        key = key.removeprefix(maker)
    return key


#: Names that fit more than one chip of the table: each was read as its fastest, so a student
#: on the 14-core M4 Max (410 GB/s, not 546) got a speed limit a third too high (twentieth
#: sweep, c C32). Such a name is refused with the chips it may mean.
_FAMILIES = {
    "M3 Max": ("M3 Max (14-core CPU)", "M3 Max (16-core CPU)"),
    "M4 Max": ("M4 Max (14-core CPU)", "M4 Max (16-core CPU)"),
    "A100": ("A100 40GB SXM", "A100 80GB SXM", "A100 80GB PCIe"),
    "A100 80GB": ("A100 80GB SXM", "A100 80GB PCIe"),
    "H100": ("H100 SXM", "H100 PCIe", "H100 NVL"),
}


#: Where a person reads which chip they have, by maker (the first word of a chip's family).
_WHERE_NAMED = {
    "Apple": "About This Mac",
    "NVIDIA": "`nvidia-smi --query-gpu=name --format=csv`",
    "AMD": "`rocm-smi --showproductname`",
}


def where_named(chip: Chip) -> str:
    """Where the owner of `chip` reads its exact name: About This Mac for a Mac, nvidia-smi for
    an NVIDIA GPU (About This Mac had been said for an H100 too)."""
    return _WHERE_NAMED.get(chip.family.split()[0], "the maker's system tool")


def find_chip(name: str) -> Chip:
    """Look a chip up by name or alias ('M4 Pro', 'h100 sxm', 'DGX Spark')."""
    wanted = _key(name)
    for family, members in _FAMILIES.items():
        if _key(family) == wanted:
            chips = [c for c in CHIPS if c.name in members]
            which = "; ".join(f"'{c.name}' ({float(c.bandwidth_gb_s):,.0f} GB/s)" for c in chips)
            raise SizingError(
                f"{echo_of(name)} names {len(chips)} chips of different speeds: {which}. "
                f"Give the one you have ({where_named(chips[0])} names it)"
            )
    for chip in CHIPS:
        if any(_key(n) == wanted for n in (chip.name, *chip.aliases)):
            return chip
    near = [repr(n) for n in near_chips(name)]
    said = f"{', '.join(near[:-1])} or {near[-1]}" if len(near) > 1 else "".join(near)
    guess = f" (did you mean {said}?)" if near else ""
    raise SizingError(
        f"{echo_of(name)} is not in felab's bandwidth table{guess}; run `felab size chips` for "
        "the list, or give the bandwidth itself with --bandwidth (GB/s from the maker's spec sheet)"
    )


def near_chips(name: str) -> list[str]:
    """The table's names closest to a mistyped one ('M4 Prp' -> 'M4 Pro', 'RTX 4900' -> 'RTX
    4090'), compared as looked up (_key); a family's name stands for its chips."""
    names: dict[str, str] = {_key(family): family for family in _FAMILIES}
    for chip in CHIPS:
        for n in (chip.name, *chip.aliases):
            names.setdefault(_key(n), chip.name)
    found = difflib.get_close_matches(_key(name), list(names), n=6, cutoff=0.75)
    return list(dict.fromkeys(names[k] for k in found))[:3]


@dataclass(frozen=True)
class BytesPerToken:
    """What one decoding step reads: the weights it uses plus the cache so far."""

    weights: Fraction
    kv_cache: Fraction
    context_tokens: int
    weights_note: str
    #: The weights counted are all of a mixture of experts', whose active share is unknown: a
    #: token reads at most these, so the ceiling is a lower bound and no speed is impossible.
    weights_at_most: bool = False

    @property
    def total(self) -> Fraction:
        return self.weights + self.kv_cache


def bytes_per_token(
    weights_bytes: int | Fraction,
    *,
    kv: KvPerToken | None = None,
    context_tokens: int = 0,
    weights_note: str = "",
    weights_at_most: bool = False,
) -> BytesPerToken:
    """Weights read per token plus, at a given context, the KV cache read with them."""
    require_positive(
        "the bytes of weights read per token",
        Fraction(weights_bytes),
        "Give the model file's size, e.g. --model-bytes 4.9GB.",
    )
    if Fraction(weights_bytes) < MIN_WEIGHTS_BYTES:
        raise SizingError(
            f"{tidy_text(Fraction(weights_bytes), 6)} "
            f"{'byte' if Fraction(weights_bytes) == 1 else 'bytes'} of weights is no model (the "
            "smallest, felab's own tiny test model, is 0.7 MB): write the unit, e.g. "
            "--model-bytes 4.9GB, or check --bits-per-weight"
        )
    if Fraction(weights_bytes) > MAX_WEIGHTS_BYTES:
        raise SizingError(
            f"{decimal_text(Fraction(weights_bytes) / TB, 1)} TB of weights is no model (the "
            "largest open models are a few TB even at 16 bits): check the unit, e.g. "
            "--model-bytes 4.9GB"
        )
    if context_tokens < 0:
        raise SizingError(f"the context length cannot be negative (got {context_tokens})")
    kv_bytes = kv.bytes * context_tokens if kv is not None and context_tokens else Fraction(0)
    return BytesPerToken(
        weights=Fraction(weights_bytes),
        kv_cache=kv_bytes,
        context_tokens=context_tokens,
        weights_note=weights_note,
        weights_at_most=weights_at_most,
    )


def weights_for(shape: ModelShape, bits_per_weight: Fraction | None = None) -> tuple[Fraction, str]:
    """Bytes of weights a token reads, and a plain note on where the number came from."""
    if shape.weights_unreadable:  # Git LFS pointers in place of the weights
        raise SizingError(shape.weights_unreadable)
    read = shape.weights_read_per_token()
    from_files = shape.weights_from is not None  # a tensor list's sum, not a typed size
    listed = shape.weights_bytes if from_files else None
    if listed is not None and listed < MIN_WEIGHTS_BYTES:  # not the typed sizes' unit advice
        raise SizingError(
            f"{shape.weights_from} hold {whole_text(listed)} bytes, no model's weights (the "
            "smallest, felab's own tiny test model, is 0.7 MB): a header without its weights, or "
            "a damaged file; give the model file's size with --model-bytes instead"
        )
    if read is not None:
        if from_files and read < MIN_WEIGHTS_BYTES:  # the files' fault, not a typed unit's
            raise SizingError(
                f"{shape.weights_from} leave {whole_text(read)} bytes for a token to read (the "
                "active experts' share), no model's weights: a header without its weights, or a "
                "damaged file; give the model file's size with --model-bytes instead"
            )
        if shape.is_moe:
            return read, (
                f"only the active experts are read: {both_ways(read)} of the "
                f"{both_ways(shape.weights_bytes or 0)} of weights"
            )
        return read, f"the weights of {shape.name}, {both_ways(read)}"
    params = shape.params_active or shape.params_total
    if params is None and shape.source.startswith("GGUF"):
        raise SizingError(
            f"{shape.source} lists no tensors that hold weights (a header or vocabulary-only "
            "file?), so the weight size is unknown: give the model file's size with "
            "--model-bytes instead"
        )
    if params is None or bits_per_weight is None:
        raise SizingError(
            f"the weight size of {shape.name} is unknown: give --model-bytes (the file's size), "
            "--gguf FILE, or --bits-per-weight for a model in the table"
        )
    if not 1 <= bits_per_weight <= 32:
        raise SizingError(
            f"--bits-per-weight {float(bits_per_weight):g} is out of range: weights take 1 to "
            "32 bits (16 for BF16, 8 for Q8_0, about 4.5 for Q4_K_M)"
        )
    weights = Fraction(params) * bits_per_weight / 8
    active = " active" if shape.is_moe else ""
    return weights, (
        f"{whole_text(params)}{active} parameters x {tidy_text(bits_per_weight)} bits ÷ 8 = "
        f"{both_ways(weights)}"
    )


def active_share(shape: ModelShape) -> Fraction | None:
    """The share of a mixture of experts' weights one token reads, from its tensors (GGUF,
    safetensors) or the table's parameter counts; None for a dense model or when unknown."""
    if not shape.is_moe:
        return None
    if shape.active_weights_bytes is not None and shape.weights_bytes:
        share = shape.active_weights_bytes / shape.weights_bytes
    elif shape.params_active and shape.params_total:
        share = Fraction(shape.params_active, shape.params_total)
    else:
        return None
    return share if 0 < share < 1 else None


def share_unknown(shape: ModelShape | None) -> bool:
    """Whether `shape` has experts whose share a token reads is unknown (a config.json whose
    layout felab does not count, or that names no experts used per token): its weights are
    then read whole, an upper bound, and the speed limit only a lower bound."""
    if shape is None or not (shape.n_experts and shape.n_experts > 1):
        return False
    return active_share(shape) is None


def read_of_file(shape: ModelShape, file_bytes: Fraction, what: str) -> tuple[Fraction, str]:
    """Bytes a token reads from a model file (`what` names it): all, or a mixture of experts'
    active share, as weights_for reads tensors (the memo had divided by the whole file)."""
    share = active_share(shape)
    if share is None:
        if share_unknown(shape):
            return file_bytes, (
                f"{what}; a mixture of experts reads only its active experts, and their share "
                "is unknown here, so this speed limit is on the low side"
            )
        return file_bytes, what
    return file_bytes * share, (
        f"{what}, of which a token reads the active experts' share: {shape.n_experts_used} of "
        f"{shape.n_experts} experts, {decimal_text(share * 100, 1)} % of the weights"
    )


@dataclass(frozen=True)
class Ceiling:
    """The most tokens per second one conversation can see on a machine."""

    bandwidth: Fraction
    reads: BytesPerToken
    chip: Chip | None = None

    @property
    def tokens_per_second(self) -> Fraction:
        return self.bandwidth / self.reads.total

    @property
    def lower_bound(self) -> bool:
        """The weights are a mixture's whole, of unknown active share: a limit of at least this."""
        return self.reads.weights_at_most

    @property
    def explanation(self) -> str:
        where = f"{self.chip.name}: " if self.chip else ""
        gbs = self.bandwidth / GB
        bw = f"{decimal_text(gbs, 0 if gbs.denominator == 1 else 2)} GB/s"
        reads = self.reads
        if reads.kv_cache:
            read_text = (
                f"({decimal_size_text(reads.weights)} of weights + "
                f"{decimal_size_text(reads.kv_cache)} of cache for "
                f"{whole_text(reads.context_tokens)} "
                f"tokens of context)"
            )
        else:  # felab's own 0.7 MB model had been "÷ 0.00 GB"
            tenths = (reads.weights * 10 / GB).denominator == 1
            read_text = size_text(reads.weights, 1 if tenths else 2)
        text = (
            f"{where}each token means reading every weight it uses once, so writing speed can "
            "never "
            f"beat memory speed ÷ bytes read: {bw} ÷ {read_text} = "
            f"{about_text(self.tokens_per_second)} tokens per second "
            f"({decimal_text(self.tokens_per_second, 2)})."
        )
        if reads.weights_note:
            text += f" Weights: {reads.weights_note}."
        if self.lower_bound:
            text += (
                " All the experts' weights are counted, but a token reads only the active "
                "experts', so the real limit is higher: this one is the least it can be, and a "
                "speed above it is unverified, not impossible."
            )
        if self.chip and reads.total > self.chip.memory_bytes:
            text += (
                f" That is more than one {self.chip.name} holds ({self.chip.memory}), so check "
                "the size: on one such chip the model does not fit in memory."
            )
        return text


def ceiling(
    bandwidth_bytes_per_s: int | Fraction, reads: BytesPerToken, chip: Chip | None = None
) -> Ceiling:
    """Single-stream decode ceiling: bandwidth ÷ bytes read per token."""
    require_positive(
        "the memory bandwidth",
        Fraction(bandwidth_bytes_per_s),
        "Give it in GB/s, e.g. --bandwidth 273, or pick a chip with --chip.",
    )
    return Ceiling(bandwidth=Fraction(bandwidth_bytes_per_s), reads=reads, chip=chip)


# A speed set against its ceiling lives in its own module; its names are read from here too.
from felab_core.sizing.speed_check import IMPOSSIBLE_CAUSES as IMPOSSIBLE_CAUSES  # noqa: E402
from felab_core.sizing.speed_check import TYPICAL_HIGH as TYPICAL_HIGH  # noqa: E402
from felab_core.sizing.speed_check import TYPICAL_LOW as TYPICAL_LOW  # noqa: E402
from felab_core.sizing.speed_check import SpeedCheck as SpeedCheck  # noqa: E402
from felab_core.sizing.speed_check import check_speed as check_speed  # noqa: E402
