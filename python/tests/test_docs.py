"""Every snippet of README.md runs, and every chunk of the articles ran when they were knitted, so that an API
move breaks a test rather than a reader.

README's Python, shell and R blocks run here with their paths moved into a temporary folder and small settings
(a synthetic ImageNet of a few tiny images, one epoch at 64 pixels). What cannot run here is checked without
running: Google Cloud and the Spark cluster of the R block (its calls must match the R functions' arguments;
they run on local[2] where sparklyr and a Spark home it drives are found, see helpers_spark.py), the
benchmark's own commands of minutes (their options must parse), and `make demo` / `make test` (the targets must exist).
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
from helpers_spark import sparklyr_spark_home

from alexnet.cli import build_parser
from alexnet.data.fetch import imagenet_categories
from alexnet.data.synthetic import imagenet_synthetic
from alexnet.data.upload import imagenet_upload

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
VIGNETTES = ROOT / "vignettes"

#: Small settings for README's examples: (pattern, replacement) in the order applied.
SMALL_PYTHON = [
    # two validation images in partition 0 at least: README shows the features of two
    (r"classes=10, quirks=True", "classes=3, images_per_class=4, val_per_class=2, max_side=64, quirks=True"),
    (r"epochs=2", "epochs=1"),
    (r"image_size=112", "image_size=64, batch_size=4, verbose=0"),
]
SMALL_SHELL = [
    (r"--classes 10 --quirks", "--classes 3 --images-per-class 4 --val-per-class 1 --max-side 64 --quirks"),
    (r"--epochs 2", "--epochs 1"),
    (r"--image-size 112", "--image-size 64 --batch-size 4"),
    (r"bench --stages decode,naive,naive_auto,io",
     "bench --stages decode,naive,naive_auto,io --images 8 --batch-size 4 --image-size 64 --seconds 0 --cores 1"),
]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown text: (info string, e.g. ``sh`` or ``r layouts``; code)."""
    return [(m.group(1).strip(), m.group(2)) for m in re.finditer(r"^```([^\n]*)\n(.*?)^```", text, re.S | re.M)]


def readme_blocks(language: str) -> list[str]:
    """README's blocks of ``language`` (the info string exactly: ``"sh"``, or ``"sh layouts"`` for the layouts')."""
    return [code for info, code in fenced_blocks(README.read_text()) if info == language]


def rewrite(code: str, tmp: Path, small: list[tuple[str, str]]) -> str:
    for pattern, replacement in small:
        code = re.sub(pattern, replacement, code)
    return code.replace("/tmp/", f"{tmp}/")


def _env(tmp: Path) -> dict[str, str]:
    python = str(ROOT / "python")
    path = os.pathsep.join(filter(None, [python, os.environ.get("PYTHONPATH", "")]))
    # a cache of their own, but the machine's precision measurement kept (a fresh one takes a training's time)
    from alexnet.train.measure import cache_file

    return {**os.environ, "PYTHONPATH": path, "ALEXNET_PROGRESS": "0", "XDG_CACHE_HOME": str(tmp / "cache"),
            "ALEXNET_PRECISION_CACHE": str(cache_file() or "off"),
            "ALEXNET_BOARD": str(tmp / "default-board")}


def test_readme_has_the_snippets_this_file_runs():
    assert len(readme_blocks("python")) == 1
    assert len(readme_blocks("sh")) == 3
    assert len(readme_blocks("r")) == 1
    assert len(readme_blocks("sh install")) == 1
    assert len(readme_blocks("sh workers")) == 1
    for language in ("r", "python", "sh"):
        assert len(readme_blocks(f"{language} layouts")) == 1
    languages = {info.split()[0] for info, _ in fenced_blocks(README.read_text()) if info}
    assert languages == {"r", "python", "sh"}, "a block this file does not run"


#: Where README's layouts section reads ImageNet from, and the layout written there (the board is a folder here).
LAYOUT_SOURCES = {"ilsvrc2012": "archives", "imagenet-object-localization-challenge.zip": "kaggle_zip",
                  "kaggle-2019": "kaggle_targz", "imagenet-1k": "parquet", "kaggle": "kaggle",
                  "imagenet": "imagefolder", "fall11": "folders"}


@pytest.fixture(scope="module")
def layout_sources(tmp_path_factory):
    """The synthetic ImageNet in each layout where README's layouts section looks for it, and the board the
    extracted tree gives."""
    tmp = tmp_path_factory.mktemp("layouts")
    small = {"classes": 3, "images_per_class": 2, "val_per_class": 1, "max_side": 32}
    for name, layout in LAYOUT_SOURCES.items():
        dest = tmp / "data" / (name if layout != "kaggle_zip" else "zip")
        imagenet_synthetic(dest, layout=layout, **small)
        if layout == "kaggle_zip":
            (dest / name).rename(tmp / "data" / name)
    imagenet_upload(tmp / "data" / "fall11", tmp / "expected")
    return tmp, board_table(imagenet_categories(tmp / "expected"))


def board_table(rows: list[dict]) -> list[dict]:
    """What boards from the same images agree on (pin versions are times of writing)."""
    return [{k: v for k, v in row.items() if not k.endswith("version")} for row in rows]


def layout_snippet(language: str, tmp: Path) -> str:
    (code,) = readme_blocks(f"{language} layouts")
    return code.replace("gs://my-bucket/imagenet", str(tmp / f"board-{language}")).replace("/data/", f"{tmp}/data/")


@pytest.mark.parametrize("language", ["python", "sh", "r"])
def test_readme_layout_snippets_run(language, layout_sources):
    """Each line of the layouts section uploads its layout; the board ends as the last line (<wnid>/ folders)
    leaves it, the same as uploading those folders alone."""
    tmp, expected = layout_sources
    code = layout_snippet(language, tmp)
    if language == "python":
        ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp), timeout=600,
                             check=False)
    elif language == "sh":
        code = code.replace(".venv/bin/alexnet", f"{shlex.quote(sys.executable)} -m alexnet.cli")
        ran = subprocess.run(["bash", "-e", "-c", code], capture_output=True, text=True, env=_env(tmp),
                             timeout=600, check=False)
    else:
        rscript = shutil.which("Rscript")
        if rscript is None:
            pytest.skip("no Rscript")
        env = {**_env(tmp), "ALEXNET_PYTHON": os.environ.get("ALEXNET_PYTHON", sys.executable)}
        ran = subprocess.run([rscript, "-e", "suppressPackageStartupMessages(library(alexnet))\n" + code],
                             capture_output=True, text=True, env=env, timeout=600, check=False)
        if ran.returncode != 0 and "there is no package called" in ran.stderr:
            pytest.skip("the R package alexnet is not installed")
    assert ran.returncode == 0, ran.stderr[-3000:]
    if language == "r":
        assert "tench, Tinca tinca" in ran.stdout and "(archives layout)" in ran.stdout  # what R prints
    assert board_table(imagenet_categories(tmp / f"board-{language}")) == expected


#: Runs the Python file given as a reader typing it would: statement by statement, each expression statement's value
#: shown (``README-VALUE [line, repr]``, a line of output each).
SHOWING = """
import ast, json, sys
namespace = {"__name__": "__main__"}
for node in ast.parse(open(sys.argv[1]).read(), sys.argv[1]).body:
    if isinstance(node, ast.Expr):
        value = eval(compile(ast.Expression(node.value), sys.argv[1], "eval"), namespace)
        print("README-VALUE " + json.dumps([node.lineno, repr(value)]), flush=True)
    else:
        exec(compile(ast.Module([node], []), sys.argv[1], "exec"), namespace)
"""

#: A result README states after an expression: a comment that starts with a Python literal, ``# (2, 4096): ...``.
STATED = re.compile(r"#\s*(\([^()]*\)|\[[^\[\]]*\]|-?\d[\d_.]*|'[^']*'|\"[^\"]*\"|True|False|None)(?=$|[\s:,;])")


def stated_results(code: str) -> dict[int, str]:
    """The results ``code`` states (:data:`STATED`), by the line of their expression statement: the repr of each.
    A comment after an expression that starts as a result would (a bracket or a digit) but cannot be read is refused,
    so that no result README states goes unchecked."""
    comments = {token.start[0]: token.string for token in tokenize.generate_tokens(io.StringIO(code).readline)
                if token.type == tokenize.COMMENT}
    stated = {}
    for node in ast.parse(code).body:
        comment = comments.get(node.end_lineno or 0, "")
        if not isinstance(node, ast.Expr) or not comment:
            continue
        match = STATED.match(comment)
        if match:
            stated[node.lineno] = repr(ast.literal_eval(match[1]))
        else:
            assert not re.match(r"#\s*[\[({\d]", comment), f"a result that cannot be read: {comment}"
    return stated


@pytest.fixture(scope="module")
def python_snippet(tmp_path_factory):
    """README's Python block, run once: its folders (the ImageNet tree and board the shell block reuses); each
    expression statement's value is shown, as a reader typing it would see it (:data:`SHOWING`)."""
    tmp = tmp_path_factory.mktemp("readme")
    (code,) = readme_blocks("python")
    (tmp / "readme.py").write_text(rewrite(code, tmp, SMALL_PYTHON))
    done = subprocess.run([sys.executable, "-c", SHOWING, str(tmp / "readme.py")], capture_output=True, text=True,
                          env=_env(tmp), timeout=600, check=False)
    return tmp, done


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_readme_python_snippet_runs(python_snippet):
    tmp, done = python_snippet
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp / "board" / "categories").is_dir()
    assert (tmp / "board" / "alexnet").is_dir()  # the model pin
    assert any((tmp / "logs").rglob("events.out.tfevents.*"))
    assert (tmp / "served" / "saved_model.pb").exists()  # the export
    assert (tmp / "conv1.png").exists()  # the first layer's filters
    assert (tmp / "own" / "categories").is_dir()  # categories of their own, trained from the model


@pytest.mark.long  # its fixture runs README's block, over 10 s: make test-long (CI)
def test_readme_python_snippet_gives_the_results_it_states(python_snippet):
    """A result README's Python block states after an expression (``# (2, 4096): the fc2 layer's values``) is what
    that expression gives when the block runs (with the small settings of :data:`SMALL_PYTHON`)."""
    _, done = python_snippet
    assert done.returncode == 0, done.stderr[-3000:]
    shown = dict(json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
                 if line.startswith("README-VALUE "))
    (code,) = readme_blocks("python")
    stated = stated_results(code)
    assert stated, "README's Python block states no result: nothing is compared"
    lines = code.splitlines()
    for line, value in stated.items():
        assert shown.get(line) == value, f"README states {value}, the code gives {shown.get(line)}: {lines[line - 1]}"


def _run_shell_lines(lines: list[str], tmp: Path) -> None:
    cli = f"{shlex.quote(sys.executable)} -m alexnet.cli"
    for line in lines:
        command = line.replace(".venv/bin/alexnet", cli)
        if " bench " in command:
            command += f" --output-dir {tmp}/bench"
        ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=_env(tmp), timeout=600,
                             check=False, cwd=tmp)
        assert ran.returncode == 0, f"{line}\n{ran.stderr[-3000:]}"
        assert "None" not in ran.stdout, f"{line}\n{ran.stdout}"


@pytest.fixture(scope="module")
def shell_snippet(python_snippet) -> tuple[Path, list[str], list[str]]:
    """README's shell block after the Python one (in folders of its own, so that a reader may run both): its
    one-machine lines, run, and its Spark lines."""
    tmp, done = python_snippet
    assert done.returncode == 0
    lines = [line for line in rewrite(readme_blocks("sh")[1], tmp, SMALL_SHELL).splitlines() if line.strip()]
    spark = [line for line in lines if " spark-" in line]
    _run_shell_lines([line for line in lines if line not in spark], tmp)
    return tmp, lines, spark


@pytest.mark.long
def test_readme_shell_snippet_runs(shell_snippet):
    tmp, lines, spark = shell_snippet
    assert len(lines) >= 9 and len(spark) == 2
    assert (tmp / "bench" / "alexnet-benchmark.json").exists()
    assert (tmp / "served-cli" / "saved_model.pb").exists()
    assert (tmp / "conv1-cli.png").exists()
    assert (tmp / "own-cli" / "categories").is_dir()  # categories of their own, trained from the model pin
    logits = (tmp / "logits.csv").read_text().splitlines()  # a row per validation image, a column per class
    header = logits[0].split(",")  # the image, then the model's classes by WordNet id
    assert header[0] == "image" and len(header) == 1 + 3 and all(re.fullmatch(r"n\d{8}", c) for c in header[1:])
    assert len(logits) == 1 + 3


@pytest.mark.workers
@pytest.mark.long  # about a minute of Spark jobs: make test-long (CI) runs it
def test_readme_shell_spark_lines_run_on_local_2(shell_snippet):
    tmp, _, spark = shell_snippet
    _run_shell_lines(spark, tmp)


def test_readme_make_targets_exist():
    """`make demo` and `make test` are the whole demo and suite: the targets must exist."""
    makefile = (ROOT / "Makefile").read_text()
    for line in readme_blocks("sh")[0].splitlines():
        target = line.split("#")[0].split()[1]
        assert re.search(rf"^{target}:", makefile, re.M), target


@pytest.mark.long
def test_readme_install_block_makes_an_environment_whose_alexnet_command_runs(tmp_path):
    """README's install of the core from a clone, run as written (from the clone, its environment in a temporary
    folder): the command it puts there runs, and the extras it names are there."""
    (code,) = readme_blocks("sh install")
    script = code.replace("~/alexnet-env", str(tmp_path / "alexnet-env"))
    built = ROOT / "python" / "build"  # where pip's build of ./python goes: the clone's copy of the modules
    had_build = built.exists()
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                              timeout=1800, env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",
                                                                                                   "VIRTUAL_ENV")})
    finally:
        if not had_build:
            shutil.rmtree(built, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage: alexnet" in done.stdout
    python = tmp_path / "alexnet-env" / "bin" / "python"
    probe = "import alexnet, pyspark, s3fs, tensorboard; print(alexnet.__file__)"
    shown = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert str(tmp_path / "alexnet-env") in shown.stdout, "the core installed there, not the clone's"


def test_readme_benchmark_commands_parse():
    """The benchmark section's commands take minutes: their options must still be the command line's."""
    parser = build_parser()
    blocks = readme_blocks("sh")[2:]
    lines = [line for code in blocks for line in code.splitlines() if line.strip()]
    assert lines
    for line in lines:
        parser.parse_args(shlex.split(line)[1:])


def test_readme_hand_launched_workers_name_the_multi_worker_strategy():
    """The workers launched by hand: each line a worker of one cluster, its index its partition, with --strategy
    multi_worker (without it each would train alone) and the same --checkpoint-dir in a bucket (a plain path would be
    each machine's own folder); the options those of `alexnet train`."""
    from alexnet.train.cluster import read_tf_config

    lines = [shlex.split(line) for line in readme_blocks("sh workers")[0].splitlines() if line.strip()]
    clusters = []
    for index, (variable, *words) in enumerate(lines):
        name, _, value = variable.partition("=")
        assert name == "TF_CONFIG"
        with pytest.MonkeyPatch.context() as patched:
            patched.setenv("TF_CONFIG", value)
            config = read_tf_config()
        args = build_parser().parse_args(words[1:])
        assert (args.command, args.strategy, config["task"]["index"]) == ("train", "multi_worker", index)
        assert (args.partition, args.total) == (index, len(config["cluster"]["worker"]))
        assert args.setting_checkpoint_dir.startswith("gs://")
        clusters.append((config["cluster"], args.setting_checkpoint_dir))
    assert len(lines) == 2 and clusters[0] == clusters[1]


R_START = """
suppressPackageStartupMessages(library(alexnet))
tmp <- Sys.getenv("README_TMP")
"""

R_PRELUDE = R_START + """
invisible(imagenet_synthetic(file.path(tmp, "imagenet"), classes = 3, images_per_class = 4, val_per_class = 1,
                             max_side = 64))
core_parameters <- function(name) {  # none for R's own functions
  tryCatch(reticulate::py_eval(sprintf(
    "list(__import__('inspect').signature(getattr(__import__('alexnet'), '%s')).parameters)", name)),
    error = function(e) character())
}
# the calls that cannot run here must still match the functions' arguments
check_calls <- function(code) {
  for (expr in as.list(parse(text = code))) {
    calls <- list(expr)
    while (length(calls)) {
      call <- calls[[1]]
      calls <- calls[-1]
      if (!is.call(call)) next
      if (identical(call[[1]], as.name("<-"))) { calls <- c(calls, list(call[[3]])); next }
      name <- deparse(call[[1]])
      if (exists(name, envir = asNamespace("alexnet"), inherits = FALSE)) {
        fn <- get(name, envir = asNamespace("alexnet"))
        matched <- match.call(fn, call)
        # names that `...` takes must be the core's (a Spark run's also alexnet_train()'s or alexnet_evaluate()'s)
        known <- c(names(formals(fn)), core_parameters(name),
                   if (grepl("^alexnet_spark_", name)) core_parameters(sub("spark_", "", name)))
        unknown <- setdiff(names(as.list(matched)[-1]), known)
        if (length(unknown)) stop(name, "() takes no argument ", paste(unknown, collapse = ", "))
      }
      calls <- c(calls, as.list(call)[-1])
    }
  }
}
"""

R_SMALL = [
    (r'install_alexnet\(\)', "invisible(NULL)"),  # make setup made the environment
    (r'"/localssd/imagenet"', 'file.path(tmp, "imagenet")'),
    (r'"gs://my-bucket/runs/1/logs"', 'file.path(tmp, "logs")'),
    (r'"gs://my-bucket/runs/1"', 'file.path(tmp, "runs")'),
    (r'"gs://my-bucket/imagenet"', 'file.path(tmp, "board")'),
    (r'"gs://my-bucket/serving/alexnet/1"', 'file.path(tmp, "served")'),
    (r"total = 16", "total = 1"),
    (r" batch_size = 32,", ""),  # the slow network's micro-batches: of 4 images, as every run's here
    (r"epochs = 10", "epochs = 1, image_size = 64, batch_size = 4, dense_units = 64, verbose = 0"),
    (r'c\("cat.jpg", "boat.jpg"\)', "data$val_image[1:2]"),
    (r'"photos/"', 'file.path(tmp, "imagenet", "ILSVRC", "Data", "CLS-LOC", "val")'),
    (r'"my-photos/"', 'file.path(tmp, "imagenet", "ILSVRC", "Data", "CLS-LOC", "train")'),  # a folder per category
    (r'"gs://my-bucket/flowers"', 'file.path(tmp, "flowers")'),
]


def _readme_r_env(tmp: Path) -> dict[str, str]:
    env = {**_env(tmp), "README_TMP": str(tmp)}
    env.setdefault("ALEXNET_PYTHON", sys.executable)
    return env


@pytest.fixture(scope="module")
def r_snippet(tmp_path_factory) -> tuple[str, Path, subprocess.CompletedProcess[str], str]:
    """README's R block run up to its Spark lines, whose calls are checked against the functions' arguments:
    (Rscript, the folder it ran in, the finished run, the Spark lines as they run on local[2])."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("no Rscript")
    probe = subprocess.run([rscript, "-e", "library(alexnet)"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the R package alexnet is not installed")
    tmp = tmp_path_factory.mktemp("readme-r")
    (code,) = readme_blocks("r")
    local, spark = re.split(r"^# or all of it across a Spark cluster.*$", code, flags=re.M)
    for pattern, replacement in R_SMALL:
        local = re.sub(pattern, replacement, local)
        spark = re.sub(pattern, replacement, spark)
    (tmp / "spark.R").write_text(spark)
    script = R_PRELUDE + local + "\ncheck_calls(readLines(file.path(tmp, 'spark.R')))\n"
    done = subprocess.run([rscript, "-e", script], capture_output=True, text=True, env=_readme_r_env(tmp),
                          timeout=900, check=False, cwd=tmp)
    spark_here = spark.replace('master = "yarn"', 'master = "local[2]", spark_home = Sys.getenv("README_SPARK_HOME")')
    return rscript, tmp, done, spark_here.replace("workers = 16", "workers = 2")


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_readme_r_snippet_runs(r_snippet):
    _, tmp, done, _ = r_snippet
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Top-1 accuracy" in done.stdout and "SavedModel export of alexnet@" in done.stdout
    assert (tmp / "board" / "alexnet").is_dir() and (tmp / "served" / "saved_model.pb").exists()
    assert (tmp / "flowers" / "categories").is_dir()  # categories of their own, trained from the model


@pytest.mark.workers
@pytest.mark.long  # its fixture runs README's block, over 10 s: make test-long (CI)
def test_readme_r_spark_lines_run_on_local_2(r_snippet):
    """README's Spark lines on local[2] through sparklyr, with the Spark home a user's session would find."""
    rscript, tmp, done, spark = r_snippet
    assert done.returncode == 0, done.stderr[-3000:]
    env = _readme_r_env(tmp)
    env["README_SPARK_HOME"] = sparklyr_spark_home(rscript, env)
    versions = {p.name for p in (tmp / "board" / "alexnet").iterdir()}
    ran = subprocess.run([rscript, "-e", R_START + spark], capture_output=True, text=True, env=env, timeout=900,
                         check=False, cwd=tmp)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "Top-1 accuracy" in ran.stdout
    assert {p.name for p in (tmp / "board" / "alexnet").iterdir()} > versions  # the Spark run pinned its model


# -- the articles ---------------------------------------------------------------------------------------------

def _chunks(orig: str) -> list[tuple[str, str]]:
    """The chunks of a .Rmd.orig: (header options, code)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```\{(\w+[^}]*)\}\n(.*?)^```", orig, re.S | re.M)]


def _prose(text: str) -> list[str]:
    """The non-blank lines of an article outside its code blocks and their output."""
    lines, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.strip() and not line.startswith("#>"):
            lines.append(line)
    return lines


@pytest.mark.parametrize("article", ["training-imagenet", "distributed-training"])
def test_every_article_line_of_prose_is_the_knitted_one(article):
    """The knitted article says what its source says: every line of the source's prose is in it, in order, so that a
    sentence mended in one of them alone (re-knitting would undo it, or keep it from readers) fails here."""
    knitted = _prose((VIGNETTES / f"{article}.Rmd").read_text())
    position = 0
    for line in _prose((VIGNETTES / f"{article}.Rmd.orig").read_text()):
        assert line in knitted[position:], f"{article}: the source's line is not in the knitted article: {line!r}"
        position = knitted.index(line, position) + 1


@pytest.mark.parametrize("article", ["training-imagenet", "distributed-training"])
def test_every_article_chunk_ran_when_knitted(article):
    """The knitted article holds every chunk of its source, each non-blank line of it whole and in order, each
    evaluated chunk followed by what it printed when it prints, and no error: it was knitted from this source and
    every chunk ran."""
    orig = (VIGNETTES / f"{article}.Rmd.orig").read_text()
    knitted = (VIGNETTES / f"{article}.Rmd").read_text()
    assert "#> Error" not in knitted and "Traceback" not in knitted
    position = 0
    evaluated = 0
    for header, code in _chunks(orig):
        if re.search(r"include\s*=\s*FALSE", header):
            continue
        lines = [line for line in code.splitlines() if line.strip()]
        for line in lines:  # each a line of its own in the knitted article, after the line before it
            found = re.compile(rf"^{re.escape(line)}$", re.M).search(knitted, position)
            assert found, f"{article}: chunk not knitted (or out of date): {line!r} (chunk of {lines[0]!r})"
            position = found.end()
        if re.search(r"eval\s*=\s*FALSE", header):
            continue
        evaluated += 1
        block_end = knitted.find("```", position)
        printing = re.search(r"\bprint\(|^\w[\w$.\[\]\"]*$|^(summary|head|table|names|plot)\(", lines[-1])
        if printing:
            output = knitted[position:block_end] if not lines[-1].startswith("plot(") else knitted[position:]
            assert "#>" in output or "![" in output, f"{article}: no output after {lines[-1]}"
        for figure in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", knitted):
            assert (VIGNETTES / figure).exists(), figure
    assert evaluated >= 3


def test_upload_help_shows_the_readme_layout_lines():
    """imagenet_upload()'s help shows each layout with README's lines (which the test above runs), in R, Python
    and the shell."""
    rd = (ROOT / "man" / "imagenet_upload.Rd").read_text()
    section = rd.split(r"\section{Each layout from R, Python and the shell}", 1)[1].split(r"\preformatted{", 1)[1]
    lines = [line for line in section.split("}", 1)[0].splitlines() if line and not line.startswith("#")]
    squeeze = lambda text: {re.sub(r"\s+#.*$", "", line).strip() for line in text.splitlines()}  # noqa: E731
    readme = {language: squeeze(readme_blocks(f"{language} layouts")[0]) for language in ("r", "python", "sh")}
    shown = {"r": [line for line in lines if line.startswith("imagenet_upload(")],
             "python": [line for line in lines if line.startswith("alexnet.imagenet_upload(")],
             "sh": [".venv/bin/" + line for line in lines if line.startswith("alexnet upload ")]}
    for language, found in shown.items():
        assert len(found) == len(LAYOUT_SOURCES), (language, found)
        assert set(found) <= readme[language], (language, set(found) - readme[language])


def test_the_demo_uploads_to_a_board_of_its_own_never_the_users():
    """`make demo` uploads a synthetic ImageNet: on a board ALEXNET_BOARD names it would replace its table."""
    demo = (ROOT / "tools" / "demo.R").read_text()
    assert 'Sys.getenv("ALEXNET_BOARD"' not in demo
    assert 'board <- file.path(out, "board")\nSys.setenv(ALEXNET_BOARD = board)' in demo
