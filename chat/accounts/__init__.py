"""Accounts: sign-up (off, with approval, open; invite links), enabling and disabling people,
password resets by staff, and per-person daily quotas enforced for chat and the API alike."""
