# The README's two commands: `make run` and `make test`.
.PHONY: setup run node stop install uninstall test test-postgres bench lint messages

VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# What `make run` installs (requirements.txt), and what tests, benches and lint add (requirements-dev.txt):
# each stamp is named for its files' contents, so a changed file installs again. Both hash-locked.
STAMP := $(VENV)/.installed-$(shell cat requirements.txt | sha256sum | cut -c1-12)
DEV_STAMP := $(VENV)/.installed-dev-$(shell cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-12)
# Text recognition (OCR) of scanned pages: Tesseract with English and Simplified/Traditional Chinese (PACKAGE:PATH).
TESSDATA := /usr/share/tesseract-ocr/5/tessdata
OCR_PACKAGES := tesseract-ocr:tesseract tesseract-ocr-eng:$(TESSDATA)/eng.traineddata
OCR_PACKAGES += tesseract-ocr-chi-sim:$(TESSDATA)/chi_sim.traineddata tesseract-ocr-chi-tra:$(TESSDATA)/chi_tra.traineddata
# PDF text layers are read by Poppler's pdftotext (without it, more slowly, by PDFium).
TEXT_PACKAGES := poppler-utils:pdftotext
# The tests draw Chinese text into their scanned pages with it.
CJK_FONT := fonts-noto-cjk:/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
# python-ldap (directory login, docs/accounts.md) is built from source against OpenLDAP's and SASL's headers.
LDAP_BUILD_PACKAGES := libldap2-dev:/usr/include/ldap.h libsasl2-dev:/usr/include/sasl/sasl.h
# The directory tests and the login bench run a real OpenLDAP server and its command-line tools.
LDAP_TEST_PACKAGES := slapd:/usr/sbin/slapd ldap-utils:ldapmodify

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) scripts/install_system_packages.py $(LDAP_BUILD_PACKAGES)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet --require-hashes -r requirements.txt -r requirements-dev.txt
	rm -f $(VENV)/.installed-dev-*
	touch $@

setup: $(STAMP)
	$(PY) scripts/build_llama_server.py >/dev/null
	$(PY) scripts/compile_messages.py

# Without Tesseract (not root, offline) the app still runs: scanned pages are named and left out;
# without pdftotext, PDFium reads the text layers.
run: setup
	-$(PY) scripts/install_system_packages.py $(TEXT_PACKAGES)
	-$(PY) scripts/install_system_packages.py $(OCR_PACKAGES)
	$(PY) scripts/stack.py run

# This box as an inference node of a main box (docs/nodes.md): `make node MAIN=http://BOX:8000 TOKEN=...`
# [NAME=...] [LLAMA_BIND=...] [LLAMA_PORT=...]; later starts need neither (var/node.json). In the
# environment, not on an argv, so the token does not show in `ps`.
node: export QWENWEB_JOIN_MAIN = $(MAIN)
node: export QWENWEB_JOIN_TOKEN = $(TOKEN)
node: export QWENWEB_JOIN_NAME = $(NAME)
node: export QWENWEB_LLAMA_BIND = $(LLAMA_BIND)
node: export QWENWEB_LLAMA_PORT = $(LLAMA_PORT)
node: setup
	$(PY) scripts/node.py

# Stops every part a `make run` (or `make node`) started: through its supervisord, or without it when supervisord was killed.
stop:
	$(PY) scripts/stack.py stop

# The boot service: a systemd unit running `make run`'s supervisord as the user qwenweb (or why it cannot here).
install: setup
	$(PY) scripts/boot_service.py install

uninstall:
	$(PY) scripts/boot_service.py uninstall

test: setup $(DEV_STAMP)
	$(PY) scripts/install_system_packages.py chromium:/usr/bin/chromium $(TEXT_PACKAGES) $(OCR_PACKAGES) $(CJK_FONT) $(LDAP_TEST_PACKAGES)
	$(PY) -m pytest

# The integration tests that touch the database, against a private PostgreSQL (Debian's package).
test-postgres: setup $(DEV_STAMP)
	$(PY) scripts/install_system_packages.py chromium:/usr/bin/chromium postgresql:pg_ctlcluster $(TEXT_PACKAGES) $(OCR_PACKAGES) $(CJK_FONT) $(LDAP_TEST_PACKAGES)
	$(PY) scripts/test_postgres.py

bench: setup $(DEV_STAMP)
	$(PY) scripts/install_system_packages.py $(TEXT_PACKAGES) $(OCR_PACKAGES) $(CJK_FONT) $(LDAP_TEST_PACKAGES)
	$(PY) bench/run_all.py

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# Both catalogues: the templates' and Python's strings (django.po), the page scripts' (djangojs.po,
# served by the JavaScript catalogue); the vendored libraries have none of ours.
messages: $(STAMP)
	$(PY) manage.py makemessages -l zh_Hans --ignore '.venv/*' --ignore 'var/*'
	$(PY) manage.py makemessages -d djangojs -l zh_Hans --ignore '.venv/*' --ignore 'var/*' --ignore 'static/vendor/*'
