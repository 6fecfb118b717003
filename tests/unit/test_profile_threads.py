"""llama-server's --threads: a profile's own count, else the box's measured default from the environment."""

from __future__ import annotations

from django.test import override_settings

from monitor.models import ServerProfile
from monitor.profiles.options import threads_for


def test_a_profile_left_at_minus_one_gets_the_boxs_default():
    with override_settings(LLAMA_DEFAULT_THREADS=2):
        assert threads_for(ServerProfile(threads=-1)) == 2
    with override_settings(LLAMA_DEFAULT_THREADS=-1):
        assert threads_for(ServerProfile(threads=-1)) == -1  # llama-server decides


def test_a_profiles_own_count_wins():
    with override_settings(LLAMA_DEFAULT_THREADS=2):
        assert threads_for(ServerProfile(threads=6)) == 6
