"""The inference box's management commands (``manage.py run_llama_server``, ``run_sampler``, ``health``...)."""
