"""The boot service's unit text, and `make install` where systemd is not running (this sandbox)."""

from __future__ import annotations

from pathlib import Path

from scripts import boot_service


def test_unit_runs_make_runs_stack_as_the_service_user():
    unit = boot_service.render_unit(root=Path("/srv/qwen web"), python="/srv/qwen web/.venv/bin/python")
    lines = unit.splitlines()
    assert 'ExecStart="/srv/qwen web/.venv/bin/python" "/srv/qwen web/scripts/stack.py" run' in lines
    assert "User=qwenweb" in lines and "Group=qwenweb" in lines
    assert "WorkingDirectory=/srv/qwen web" in lines
    assert "Restart=always" in lines
    assert 'Environment="QWENWEB_VAR_DIR=/srv/qwen web/var"' in lines
    assert "WantedBy=multi-user.target" in lines


def test_install_without_systemd_says_why_and_changes_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(boot_service, "SYSTEMD_RUNNING", tmp_path / "absent")
    monkeypatch.setattr(boot_service, "UNIT_PATH", tmp_path / "qwenweb.service")
    assert boot_service.install() == 0
    out = capsys.readouterr().out
    assert "systemd is not the init system here" in out and "ExecStart=" in out
    assert not (tmp_path / "qwenweb.service").exists()
    assert boot_service.uninstall() == 0
