"""The sign-in cookie of a hub reached over https through a proxy, as `fleetmark serve` runs in
production: X-Forwarded-Proto is believed from the addresses FLEETMARK_FORWARDED_ALLOW_IPS
names (127.0.0.1 by default), and then the cookie is Secure and named `__Host-…`; from any
other address the header is ignored. The sign-in form's cookie is so named and Secure too."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from hub.security import API_TOKEN_PREFIX, new_token
from tests.conftest import DatabaseServer
from tests.served import ServedHub, hub_environment, served_hub

FROM_A_TLS_PROXY = {"X-Forwarded-Proto": "https"}


@pytest.fixture(scope="module")
def database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture(scope="module")
def admin_token(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    token = new_token(API_TOKEN_PREFIX)
    path = tmp_path_factory.mktemp("admin") / "admin.token"
    path.write_text(token)
    return token, path


@contextmanager
def production_hub(
    database: str, admin_token: tuple[str, Path], folder: Path, **variables: str
) -> Iterator[ServedHub]:
    environment = hub_environment(
        database, folder, FLEETMARK_ADMIN_TOKEN_FILE=str(admin_token[1]), **variables
    )
    environment["FLEETMARK_MODE"] = "production"
    with served_hub(environment, folder / "hub.log") as hub:
        yield hub


def sign_in(hub: ServedHub, token: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        hub.url + "/login", data={"token": token, "next": "/drift"}, headers=headers, timeout=30
    )


def test_over_https_from_a_trusted_proxy_the_cookie_is_secure(
    database: str, admin_token: tuple[str, Path], tmp_path: Path
) -> None:
    token = admin_token[0]
    with production_hub(database, admin_token, tmp_path) as hub:
        form = httpx.get(hub.url + "/login", headers=FROM_A_TLS_PROXY, timeout=30)
        secure = sign_in(hub, token, FROM_A_TLS_PROXY)
        plain = sign_in(hub, token, {})
        cookie = secure.cookies["__Host-fleetmark_sign_in"]
        page = httpx.get(
            hub.url + "/drift",
            headers=FROM_A_TLS_PROXY | {"Cookie": f"__Host-fleetmark_sign_in={cookie}"},
            timeout=30,
        )

    assert secure.status_code == 303
    set_cookie = secure.headers["set-cookie"]
    assert set_cookie.startswith("__Host-fleetmark_sign_in=fms_")
    assert {"Secure", "HttpOnly", "Path=/", "SameSite=lax"} <= set(set_cookie.split("; "))
    assert "Domain" not in set_cookie
    assert page.status_code == 200
    form_cookie = form.headers["set-cookie"]
    assert form_cookie.startswith("__Host-fleetmark_sign_in_form=")
    assert {"Secure", "HttpOnly", "Path=/", "SameSite=strict"} <= set(form_cookie.split("; "))
    assert "Domain" not in form_cookie
    assert plain.headers["set-cookie"].startswith("fleetmark_sign_in=fms_")
    assert "Secure" not in plain.headers["set-cookie"]


def test_from_an_untrusted_address_the_forwarded_scheme_is_ignored(
    database: str, admin_token: tuple[str, Path], tmp_path: Path
) -> None:
    with production_hub(
        database, admin_token, tmp_path, FLEETMARK_FORWARDED_ALLOW_IPS="10.9.8.7"
    ) as hub:
        signed_in = sign_in(hub, admin_token[0], FROM_A_TLS_PROXY)

    assert signed_in.status_code == 303
    set_cookie = signed_in.headers["set-cookie"]
    assert set_cookie.startswith("fleetmark_sign_in=fms_")
    assert "Secure" not in set_cookie
