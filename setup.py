"""The wheel carries the web UI: ``webapp/`` (top level in the checkout) is copied to ``adlrec/webapp/``.

Everything else is in pyproject.toml.  An editable install has no copy; the service then serves the
checkout's ``webapp/`` (``Settings.resolved_webapp_dir``).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithWebapp(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "webapp"
        if not (source / "index.html").is_file():  # a build from an sdist without it must not pass silently
            raise FileNotFoundError(f"{source} has no index.html: the wheel would carry no web UI")
        self.copy_tree(str(source), str(Path(self.build_lib) / "adlrec" / "webapp"))


setup(cmdclass={"build_py": BuildPyWithWebapp})
