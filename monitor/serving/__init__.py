"""Serving a request: the fair queue over a profile's nodes and the serving slot every caller takes.

``slot.py`` is the way in (chat turns, API calls, summaries and scanned pages alike); ``queue.py`` and
its script ``queue.lua`` decide who is served where; ``holders.py`` names the processes that hold slots.
"""
