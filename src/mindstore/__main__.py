"""`python -m mindstore ...`: the same command line as the `mindstore` console script."""

from mindstore.cli import app

app(prog_name="mindstore")
