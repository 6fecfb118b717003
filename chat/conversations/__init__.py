"""Conversations and their messages: writes, reads, and the turn that streams each answer."""
