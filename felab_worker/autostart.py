"""A machine's worker as a service of the machine: a launchd LaunchAgent on macOS, a systemd
user unit on Linux, so it starts at login, restarts when it fails, and comes back after sleep.

The service file holds no secret: it runs `felab worker start --name NAME` with the settings
that say where things are (the identity file, the targets file, the CA), and the identity file
keeps the key and the broker password, readable by its owner only.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from felab_core.settings import Settings

#: Settings a worker needs that say where things are; none of them is a secret.
PASSED = (
    "FELAB_DATA_DIR",
    "FELAB_TARGETS_FILE",
    "FELAB_WORKER_KEY_FILE",
    "FELAB_BROKER_CA_FILE",
    "FELAB_BROKER_PREFIX",
    "FELAB_LOG_FORMAT",
    "FELAB_LOG_LEVEL",
    "FELAB_METRICS_PORT",
)


@dataclass(frozen=True)
class ServiceFile:
    kind: str  # "launchd" or "systemd"
    path: Path
    text: str
    label: str


def _felab() -> str:
    found = Path(sys.executable).with_name("felab")
    return str(found) if found.exists() else (shutil.which("felab") or "felab")


def _environment(settings: Settings, key_file: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED if os.environ.get(k)}
    env["FELAB_DATA_DIR"] = str(settings.data_dir.resolve())
    env["FELAB_WORKER_KEY_FILE"] = str(key_file.resolve())
    if settings.targets_file is not None:
        env["FELAB_TARGETS_FILE"] = str(settings.targets_file.resolve())
    if settings.broker_ca_file is not None:
        env["FELAB_BROKER_CA_FILE"] = str(settings.broker_ca_file.resolve())
    return env


def service_file(
    settings: Settings, name: str, key_file: Path, *, platform: str | None = None
) -> ServiceFile:
    """The service definition for worker `name` on this platform (or the one named)."""
    platform = platform or sys.platform
    env = _environment(settings, key_file)
    args = [_felab(), "worker", "start", "--name", name]
    logs = settings.data_dir.resolve() / f"worker-{name}.log"
    if platform == "darwin":
        label = f"org.felab.worker.{name}"
        plist = {
            "Label": label,
            "ProgramArguments": args,
            "EnvironmentVariables": env,
            "RunAtLoad": True,
            "KeepAlive": True,  # restarted whenever it exits, after sleep too
            "ThrottleInterval": 10,
            "StandardOutPath": str(logs),
            "StandardErrorPath": str(logs),
        }
        path = Path.home() / "Library" / "LaunchAgents" / f"{label}.plist"
        return ServiceFile("launchd", path, plistlib.dumps(plist).decode(), label)
    label = f"felab-worker-{name}.service"
    lines = [
        "[Unit]",
        f"Description=felab worker {name}: benchmarks from the cohort's chat, on this machine",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={' '.join(_quoted(a) for a in args)}",
        *(f'Environment="{k}={v}"' for k, v in sorted(env.items())),
        "Restart=always",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    path = Path.home() / ".config" / "systemd" / "user" / label
    return ServiceFile("systemd", path, "\n".join(lines), label)


def _quoted(arg: str) -> str:
    return f'"{arg}"' if any(c.isspace() for c in arg) else arg


class ServiceError(RuntimeError):
    """The service manager refused or could not be reached (exit 3: nothing in the command to
    fix); the message says what it said."""


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ServiceError(f"{cmd[0]} is not on this machine") from None
    if out.returncode != 0:
        raise ServiceError(f"`{' '.join(cmd)}` said: {(out.stderr or out.stdout).strip()}")
    return out.stdout


def install(svc: ServiceFile) -> None:
    svc.path.parent.mkdir(parents=True, exist_ok=True)
    svc.path.write_text(svc.text)
    if svc.kind == "launchd":
        _run(["launchctl", "load", "-w", str(svc.path)])
    else:
        _run(["systemctl", "--user", "daemon-reload"])
        _run(["systemctl", "--user", "enable", "--now", svc.label])


def uninstall(svc: ServiceFile) -> bool:
    """Stop and remove the service; False when it was not installed (its file is absent: the
    service manager is not asked, so a machine without one is told so, not its error)."""
    if not svc.path.exists():
        return False
    if svc.kind == "launchd":
        _run(["launchctl", "unload", "-w", str(svc.path)])
    else:
        _run(["systemctl", "--user", "disable", "--now", svc.label])
    svc.path.unlink(missing_ok=True)
    if svc.kind == "systemd":
        _run(["systemctl", "--user", "daemon-reload"])
    return True


def status(svc: ServiceFile) -> str:
    if not svc.path.exists():
        return f"not installed ({svc.path} is absent)"
    if svc.kind == "launchd":
        return _run(["launchctl", "list", svc.label]).strip()
    out = subprocess.run(
        ["systemctl", "--user", "is-active", svc.label], capture_output=True, text=True, timeout=30
    )
    return f"{svc.label}: {out.stdout.strip() or out.stderr.strip()}"
