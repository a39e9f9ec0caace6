"""The pairing URL `felab broker setup` prints for students: built from the broker's scheme,
host, port and database only (seventh sweep: an IPv6 address lost its brackets and exited 70;
an admin's ?password=... was copied into the students' URL)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from felab.cli.broker import public_url
from felab_core.settings import Settings
from felab_worker.broker import with_credentials


@pytest.mark.parametrize(
    ("admin", "students"),
    [
        ("redis://admin:pw@[::1]:6379/0", "redis://[::1]:6379/0"),
        ("rediss://admin:pw@broker.example:6380/2", "rediss://broker.example:6380/2"),
    ],
)
def test_the_students_url_holds_no_admin_secret_and_keeps_ipv6(admin: str, students: str) -> None:
    settings = Settings(broker_url=admin, _env_file=None)  # type: ignore[call-arg]
    assert public_url(settings) == students
    paired = with_credentials(public_url(settings), "felab-pairing", "p/w")
    assert paired == students.replace("//", "//felab-pairing:p%2Fw@", 1)
    assert "QSECRET" not in paired and "admin" not in paired


@pytest.mark.parametrize(
    "admin",
    [
        "redis://127.0.0.1:6379/0?password=QSECRET",
        "rediss://admin:pw@broker.example:6380/2#frag",
        "rediss://admin:pw@broker.example:6380/2?ssl_cert_reqs=none",
        "redis://127.0.0.1:6379/0?foo=bar",
    ],
)
def test_a_broker_url_with_options_is_refused_at_load(admin: str) -> None:
    """Eleventh sweep: options after ? reached redis-py as keyword arguments (a TypeError, "a
    bug in felab"), or turned off the certificate check; felab sets them itself."""
    with pytest.raises(ValidationError, match=r"holds options after \? or #") as caught:
        Settings(broker_url=admin, _env_file=None)  # type: ignore[call-arg]
    assert "a password goes before the host" in str(caught.value)
