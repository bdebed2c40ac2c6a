# Two commands a newcomer needs (README): `make demo` and `make test`. Both start with `make setup`,
# which installs only what is missing: a second run installs nothing.

SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
VPY := $(VENV)/bin/python
BUILD := $(CURDIR)/build
PY_STAMP := $(VENV)/.alexnet-setup
R_DEPS_STAMP := $(BUILD)/.r-deps
R_PKG_STAMP := $(BUILD)/.r-package
R_SOURCES := DESCRIPTION NAMESPACE $(wildcard R/*.R) $(wildcard man/*.Rd) $(shell find inst tests vignettes python/alexnet -type f -not -path '*/__pycache__/*' -not -path '*/.pytest_cache/*' -not -path 'tests/testthat/_snaps/*' 2>/dev/null) python/pyproject.toml python/constraints.txt

# Everything make runs uses the checkout's Python environment.
export ALEXNET_PYTHON := $(VPY)
export RETICULATE_PYTHON := $(VPY)
export ALEXNET_PROGRESS ?= 1

.PHONY: setup demo test test-python test-r test-check test-site test-long site check lint docs vignettes constraints clean

# (the typed signatures come with the R package's: $(R_PKG_STAMP) needs $(TYPED), defined below)
setup: $(PY_STAMP) $(R_PKG_STAMP)

# Python: the core, editable, with every extra, at the versions in constraints.txt.
$(PY_STAMP): python/pyproject.toml python/constraints.txt
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -c python/constraints.txt -e 'python[all]'
	@touch $@

# R from Debian, only the packages that are missing.
$(R_DEPS_STAMP): tools/install-r-deps.sh tools/install-r-suggests.sh
	@mkdir -p $(BUILD)
	bash tools/install-r-deps.sh
	bash tools/install-r-suggests.sh
	@touch $@

# R's tables of the core's declarations (the training settings, the benchmark's, a Spark job's options, an
# model's (evaluation, prediction, export), the data stage's), generated whenever a declaration
# changes (a test checks that the committed files are what the declarations give).
R_TABLES := R/settings.R R/bench-settings.R R/launch-options.R R/model-options.R R/data-options.R
DECLARATIONS := python/alexnet/train/settings.py python/alexnet/bench/plan.py python/alexnet/bench/accuracy.py \
	python/alexnet/bench/scaling.py \
	python/alexnet/launch/options.py python/alexnet/model/options.py python/alexnet/data/options.py \
	python/alexnet/declare/kinds.py \
	python/alexnet/cli/to_r.py
$(R_TABLES) &: $(DECLARATIONS) $(PY_STAMP)
	$(VPY) -m alexnet.cli.to_r R

# The typed signatures of the core's functions that take declared settings through ** keywords (what type checkers
# and editors read), generated from the same declarations and those functions whenever one changes (a test checks
# that the committed file is what they give).
TYPED := python/alexnet/_typed.py
TYPED_FROM := $(DECLARATIONS) python/alexnet/cli/to_typed.py python/alexnet/declare/declaration.py \
	python/alexnet/__init__.py python/alexnet/train/api.py python/alexnet/bench/api.py python/alexnet/launch/api.py \
	python/alexnet/launch/training.py $(addprefix python/alexnet/model/,evaluate.py export.py features.py predict.py \
	pin.py) $(addprefix python/alexnet/data/,synthetic.py upload.py fetch.py)
$(TYPED): $(TYPED_FROM) $(PY_STAMP)
	$(VPY) -m alexnet.cli.to_typed $@

# The R package is built the way remotes::install_github() and pak build it, with plain `R CMD build` of the
# root's sources: inst/python is a link to python/, so the tarball carries the Python core (install_alexnet()
# installs it).
$(R_PKG_STAMP): $(R_DEPS_STAMP) $(PY_STAMP) $(R_TABLES) $(TYPED) $(R_SOURCES)
	bash tools/build-r-package.sh $(CURDIR) $(BUILD)
	bash tools/install-r-package.sh $(BUILD)/alexnet_*.tar.gz $(BUILD)/r-install.log
	Rscript -e 'alexnet::alexnet_use_python("$(VPY)")'
	@touch $@

demo: setup
	bash tools/demo.sh

test: setup test-python test-r test-check test-site

# R CMD check without re-running the tests (test-r ran them); warnings fail it too.
test-check: setup
	$(MAKE) --no-print-directory check CHECK_ARGS=--no-tests

# The Python and R test runs of make test and make test-long: the same command, a different selection; the 25
# slowest tests are listed at the end, to keep make test within its budget.
PYTEST := cd python && ALEXNET_PROGRESS=0 $(VPY) -m pytest -q -ra --durations=25 --ignore=tests/test_site.py
# The linters of make lint and make test-python: ruff over the Python core and the tools, mypy over the core (its
# settings in python/pyproject.toml, its cache in build/).
LINT := $(VENV)/bin/ruff check python && $(VENV)/bin/ruff check --config python/pyproject.toml tools && \
	cd python && $(VENV)/bin/mypy --cache-dir $(BUILD)/mypy-cache alexnet
TESTTHAT := cd tests && NOT_CRAN=true ALEXNET_PROGRESS=0 ALEXNET_REQUIRE_PYTHON=1

# make test's Python tests run in TEST_PROCESSES processes (pytest-xdist), each test file whole in one of them, so
# that a file's fixtures (a trained model, a board) are made once; each process starts its own storage servers.
# On 2 cores: 350 s against about 780 s in one process. make test-long runs its tests the same way, but those marked
# `workers` (several training workers, Spark jobs, the benchmark's timings: each takes every core) one at a time after.
TEST_PROCESSES ?= 2
IN_PROCESSES = -n $(TEST_PROCESSES) --dist loadfile
test-python: setup
	$(PYTEST) $(IN_PROCESSES) -m "not long"
	$(LINT)

# Tests too long for make test's budget of about 20 minutes on 2 cores (pytest's `long` mark, R's skip_unless_long()):
# the runs of several workers that resume, agree under every lever or evaluate after a killed worker, a Spark
# standalone cluster, README's shell block, the benchmark's end to end, R's install from a plain build and its
# real Spark and multi-worker jobs; and slow checks of rarer paths (an export to s3 beside the one to gs, a model
# saved with the old pooling layer, two devices mirrored, the precision timed in a child, an export's overwrite
# beside TF Lite's); and every Python test of more than about 10 s but the short run that learns, so that make test
# keeps one training end to end. CI runs them after make test.
test-long: setup
	$(PYTEST) $(IN_PROCESSES) -m "long and not workers"
	$(PYTEST) -m "long and workers"
	$(TESTTHAT) ALEXNET_TESTS=long Rscript testthat.R

test-r: setup
	$(TESTTHAT) Rscript testthat.R
	@# again as on a machine without the Python core (as CRAN checks it): every test passes, or skips saying why
	rm -rf $(BUILD)/no-core && mkdir -p $(BUILD)/no-core
	cd tests && NOT_CRAN=true ALEXNET_PROGRESS=0 ALEXNET_PYTHON= RETICULATE_PYTHON= R_USER_CONFIG_DIR=$(BUILD)/no-core \
		WORKON_HOME=$(BUILD)/no-core Rscript testthat.R

# R CMD check on the built tarball (sparklyr is only suggested and is not installable here).
# Their temporary files go to $(BUILD)/tmp, made anew each time: the vignettes train in an embedded Python, which
# never removes what TensorFlow's autograph writes (24 files in /tmp a check).
check: setup
	rm -rf $(BUILD)/tmp && mkdir -p $(BUILD)/tmp
	TMPDIR=$(BUILD)/tmp bash tools/build-r-package.sh $(CURDIR) $(BUILD)
	cd $(BUILD) && TMPDIR=$(BUILD)/tmp _R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual $(CHECK_ARGS) alexnet_*.tar.gz
	@! grep -E '^Status:.*WARNING' $(BUILD)/alexnet.Rcheck/00check.log

lint: setup
	$(LINT)

# Re-knit the articles (vignettes/*.Rmd.orig -> *.Rmd) with the installed package and its Python core.
vignettes: setup
	Rscript tools/precompute-vignettes.R

# The documentation site (pkgdown) in docs/: home from README, the reference grouped by stage, both articles.
site: setup
	Rscript tools/build-site.R > $(BUILD)/site.log 2>&1 || { cat $(BUILD)/site.log; exit 1; }
	@echo "Site in $(CURDIR)/docs/index.html"

# The site as a browser shows it: headless Chromium opens every page (python/tests/test_site.py).
test-site: site
	bash tools/install-browser.sh
	cd python && ALEXNET_PROGRESS=0 $(VPY) -m pytest -q -ra tests/test_site.py

# Regenerate the roxygen2 docs (NAMESPACE, man/) after changing R/ or a declaration of the core.
docs: $(R_TABLES) $(TYPED)
	Rscript -e 'roxygen2::roxygenise()'

constraints: $(PY_STAMP)
	{ echo "# Exact versions the project is tested with (pip install -c constraints.txt ...)."; \
	  echo "# Regenerate: make constraints"; \
	  $(VPY) -m pip freeze --exclude-editable | grep -viE '^(alexnet|tensorflow.cpu)=='; } > python/constraints.txt

clean:
	rm -rf $(BUILD)
