"""Login throttling through the real login forms (Daphne, django-axes, the database)."""

from __future__ import annotations

import re

import httpx
import pytest
from django.conf import settings

from tests.support.client import base_url, login, make_user

pytestmark = pytest.mark.usefixtures("web_server")


def try_login(path: str, username: str, password: str, language: str = "en") -> httpx.Response:
    with httpx.Client(base_url=base_url(), timeout=30, headers={"Accept-Language": language}) as http:
        page = http.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return http.post(
            path,
            data={"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"},
            headers={"Referer": base_url() + path},
        )


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_wrong_passwords_lock_that_username_from_that_address(path):
    limit = settings.LOGIN_FAILURE_LIMIT
    assert limit == 5
    user = make_user(is_staff=True)
    for _attempt in range(limit - 1):
        response = try_login(path, user.username, "wrong-password")
        assert response.status_code == 200 and "Too many wrong passwords" not in response.text
    locked = try_login(path, user.username, "wrong-password")
    assert locked.status_code == 429
    message = "Too many wrong passwords for this username from your address: logging in is locked for 15 minutes."
    assert message in locked.text and "<form" in locked.text
    # The right password no longer opens it, in either language.
    refused = try_login(path, user.username, user.raw_password)
    assert refused.status_code == 429 and message in refused.text and "sessionid" not in refused.cookies
    chinese = try_login(path, user.username, user.raw_password, language="zh-hans")
    assert chinese.status_code == 429 and "密码错误次数过多" in chinese.text
    # Someone else, from the same address, is not locked out.
    other = make_user()
    login(other).close()
