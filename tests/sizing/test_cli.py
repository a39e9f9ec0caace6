"""`felab size ...` through typer's CliRunner: tables, explanations, and clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def size(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["size", *args], env=WIDE)
    return result.exit_code, result.output


def test_size_is_registered_with_its_commands() -> None:
    code, out = size("--help")
    assert code == 0
    for command in ("kv", "capacity", "slots", "limit", "chips"):
        assert command in out


def test_kv_from_the_table() -> None:
    code, out = size("kv", "--model", "llama-3.1-8b", "--tokens", "32768")
    assert code == 0, out
    assert "131,072 (128 KiB)" in out
    assert "4,096 MiB = 4.29 GB" in out
    assert "2 x 32 layers x 8 KV heads x 128 numbers x 2 bytes = 131,072 bytes" in out


def test_kv_from_a_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "num_hidden_layers": 80,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "hidden_size": 8192,
            }
        )
    )
    code, out = size("kv", "--config", str(cfg), "--dtype", "fp8")
    assert code == 0, out
    assert "163,840 (160 KiB)" in out


def test_capacity_from_flags_shows_the_what_ifs() -> None:
    code, out = size("capacity", "--blocks", "8234", "--block-size", "16", "--max-len", "8192")
    assert code == 0, out
    assert "131,744 ÷ 8,192 = 16.08, so 16 conversations at once" in out
    assert "263,488 tokens ÷ 4,096 = 64.33, so 64 conversations" in out


def test_capacity_from_a_vllm_log() -> None:
    code, out = size("capacity", "--vllm-log", str(FIXTURES / "vllm_v0_blocks_executor_base.log"))
    assert code == 0, out
    assert "14,815 blocks x 16 tokens = 237,040 tokens" in out
    assert "vLLM V0 engine" in out


def test_slots_trap_and_fix() -> None:
    code, out = size(
        "slots", "-c", "8192", "--parallel", "4", "--need", "8000", "--model", "llama-3.1-8b"
    )
    assert code == 0, out
    assert "does not fit" in out
    assert "-c 32768 --parallel 4" in out
    assert "4,096 MiB = 4.29 GB" in out


def test_slots_unified_short_flag() -> None:
    code, out = size("slots", "-c", "8192", "-np", "4", "-kvu", "--need", "8000")
    assert code == 0, out
    assert "fits one at a time" in out


def test_limit_with_a_chip_and_a_measured_speed() -> None:
    code, out = size("limit", "--chip", "M4 Pro", "--model-bytes", "4.9GB", "--measured", "70")
    assert code == 0, out
    assert "273 GB/s ÷ 4.9 GB = about 56 tokens per second" in out
    assert "impossible" in out and "prompt tokens were counted" in out


def test_limit_on_an_mi300x() -> None:
    code, out = size("limit", "--chip", "mi300x", "--model-bytes", "4.9GB")
    assert code == 0, out
    assert "MI300X" in out and "5,300 GB/s ÷ 4.9 GB = about 1,082 tokens per second" in out


def test_kv_for_qwen25_says_nothing_of_sliding_windows() -> None:
    code, out = size("kv", "--config", str(FIXTURES / "qwen2.5-7b-instruct"))
    assert code == 0, out
    assert "57,344 bytes" in out and "sliding" not in out


def test_chips_table_with_ceilings() -> None:
    code, out = size("chips", "--model-bytes", "4.9GB", "--family", "DGX")
    assert code == 0, out
    assert "DGX Spark (GB10)" in out and "55.7 tokens/s" in out
    assert "M4 Pro" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("kv",), "name the model exactly one way"),
        (("kv", "--gguf", "/nonexistent.gguf"), "does not exist"),
        (("capacity", "--blocks", "0", "--max-len", "8192"), "must be more than zero"),
        (("capacity", "--blocks", "-5", "--max-len", "8192"), "must be more than zero"),
        (("capacity", "--blocks", "100"), "give --max-len"),
        (("capacity", "--vllm-log", str(FIXTURES / "README.md")), "no KV-cache lines"),
        (("slots",), "give -c"),
        (("slots", "-c", "0"), "-c 0 tells llama-server"),
        (("slots", "-c", "8192", "--parallel", "-2"), "must be more than zero"),
        (("limit", "--chip", "M4", "--bandwidth", "120", "--model-bytes", "1GB"), "one way"),
        (("limit", "--bandwidth", "0", "--model-bytes", "1GB"), "bandwidth must be more than zero"),
        (("limit", "--chip", "M4", "--model-bytes", "4.9 G"), "unknown size unit"),
        (("chips", "--model-bytes", "lots"), "could not read"),
    ],
)
def test_bad_input_gets_one_clear_line(args: tuple[str, ...], message: str) -> None:
    code, out = size(*args)
    assert code == 2, out
    assert "error: " in out and message in out
    assert "Traceback" not in out


def test_url_of_a_server_that_is_not_there() -> None:
    code, out = size("slots", "--url", "http://127.0.0.1:9")
    assert code == 3  # a service not reached, not a typo
    assert "connection refused: nothing listens at http://127.0.0.1:9" in out


def test_url_of_a_server_that_is_not_llama_cpp() -> None:
    """A real HTTP server that answers like vLLM (no /props) is refused with the reason."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class VllmLike(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"detail":"Not Found"}'
            self.send_response(404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), VllmLike)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        code, out = size("slots", "--url", f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 2
    assert "does not look like llama-server (GET /props answered HTTP 404)" in out


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--try-dtype", "q4_0"], "--try-dtype 'q4_0' is llama.cpp's cache type"),
        (["--kv-dtype", "iq4_nl"], "--kv-dtype 'iq4_nl' is llama.cpp's cache type"),
    ],
)
def test_capacity_refuses_a_cache_type_vllm_cannot_run(flags: list[str], says: str) -> None:
    """Seventeenth sweep (c) M3: a q4_0 vLLM cache was sized as a what-if (3.5 times)."""
    result = runner.invoke(
        app, ["size", "capacity", "--tokens", "1000", "--max-len", "100", *flags]
    )
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("tokens", "block", "says"),
    [
        ("1000", "999", "a cache of 1,000 tokens is not a whole number of 999-token blocks"),
        ("131744", "4096", "(32 blocks hold 131,072)"),
    ],
)
def test_capacity_refuses_a_cache_that_is_not_whole_blocks(
    tokens: str, block: str, says: str
) -> None:
    """Seventeenth sweep (c) H6: "32 blocks x 4,096 tokens = 131,744" was printed."""
    argv = ["size", "capacity", "--tokens", tokens, "--max-len", "100", "--block-size", block]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())


def test_an_input_path_with_an_escape_code_is_not_sent_to_the_terminal() -> None:
    """Seventeenth sweep (c) L16: ESC[2J in a --vllm-log path cleared the screen."""
    result = runner.invoke(app, ["size", "capacity", "--vllm-log", "a\x1b[2Jb.log"])
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "a?[2Jb.log does not exist" in result.output


def test_capacity_refuses_a_kv_dtype_its_log_contradicts(tmp_path: Path) -> None:
    """Eighteenth sweep (c) M4: --kv-dtype f16 beside a log of fp8 was dropped without a word;
    left out, the log's own type is used."""
    log = tmp_path / "fp8.log"
    log.write_text(
        "INFO kv_cache_dtype=fp8\nINFO GPU KV cache size: 2,042,016 tokens\n"
        "INFO Maximum concurrency for 2,048 tokens per request: 997.08x\n"
    )
    code, out = size("capacity", "--vllm-log", str(log), "--kv-dtype", "f16")
    assert code == 2 and "--kv-dtype f16 would not be how it runs" in out, out
    code, out = size("capacity", "--vllm-log", str(log))
    assert code == 0 and "as started (fp8)" in out, out


def test_kv_past_the_trained_context_says_so() -> None:
    """Twentieth sweep (c) C3: a billion tokens of Llama 3.1 8B were priced without a word,
    where `size limit --context` refuses past the trained context."""
    past = runner.invoke(app, ["size", "kv", "--model", "llama-3.1-8b", "-c", "1000000000"])
    assert past.exit_code == 0, past.output
    assert "is longer than Llama 3.1 8B reads (131,072 tokens)" in past.output
    within = runner.invoke(app, ["size", "kv", "--model", "llama-3.1-8b", "-c", "8192"])
    assert "is longer than" not in within.output


def test_a_cache_no_machine_holds_is_said() -> None:
    """Twentieth sweep (c) C23: 119 TiB of cache for one seat was priced without a word."""
    out = runner.invoke(
        app, ["size", "slots", "-c", "1000000000", "-np", "1", "--model", "llama-3.1-8b"]
    )
    assert out.exit_code == 0, out.output
    assert "119.21 TiB" in out.output and "No machine holds that" in out.output
    honest = runner.invoke(app, ["size", "kv", "--model", "llama-3.1-8b", "-c", "131072"])
    assert "No machine holds that" not in honest.output
