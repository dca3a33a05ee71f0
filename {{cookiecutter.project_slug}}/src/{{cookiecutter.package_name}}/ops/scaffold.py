"""The project's source tree and the scaffold templates `generate` renders.

`src/<package>/scaffold/*.j2` are the Jinja files the project template rendered this
project's first transport modules, item classes and boxes from (it copies them unrendered);
rendering them here with the same variables gives new boxes the same code: one source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from .errors import OpsError

PACKAGE = __name__.split(".")[0]
DEFAULT_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class ProjectFiles:
    root: Path
    package: str = PACKAGE

    @classmethod
    def find(cls, root: str | Path | None = None) -> ProjectFiles:
        project = cls(Path(root).resolve() if root else DEFAULT_ROOT)
        missing = [
            str(p.relative_to(project.root))
            for p in (
                project.items,
                project.boxes,
                project.versions,
                project.transports,
                project.scaffold,
            )
            if not p.exists()
        ]
        if missing:
            raise OpsError(
                f"{project.root} is not this service's source tree (missing {', '.join(missing)});"
                " run generate from a source checkout (editable install) or pass --root"
            )
        return project

    @property
    def package_dir(self) -> Path:
        return self.root / "src" / self.package

    @property
    def items(self) -> Path:
        return self.package_dir / "items.py"

    @property
    def transports(self) -> Path:
        return self.package_dir / "transports"

    @property
    def scaffold(self) -> Path:
        return self.package_dir / "scaffold"

    @property
    def boxes(self) -> Path:
        return self.root / "config" / "boxes.yaml"

    @property
    def versions(self) -> Path:
        return self.root / "migrations" / "versions"


def camel(name: str) -> str:
    """The class-name form of a snake_case name, as the project template writes it."""
    return name.title().replace("_", "")


def render(scaffold: Path, template: str, **values: object) -> str:
    """One scaffold template rendered with `values` (every variable it uses must be given)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(scaffold),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Python and YAML source, not HTML
    )
    try:
        return env.get_template(template).render(**values)
    except jinja2.TemplateError as exc:
        raise OpsError(f"{scaffold / template}: {exc}") from None


def item_transport(project: ProjectFiles, name: str, kind: str) -> tuple[str, str]:
    """The class name and the module of a new box's transport: the scaffold the template
    rendered this project's first transport modules from, with the same variables."""
    if kind == "outbox":
        cls = f"{camel(name)}EventsKafkaTransport"
        return cls, render(project.scaffold, "outbox_transport.py.j2", name=name, cls=cls)
    cls = f"{camel(name)}LogHandler"
    title = f"Handlers of the {name} inbox box"
    return cls, render(project.scaffold, "inbox_handler.py.j2", title=title, cls=cls)


def item_class(project: ProjectFiles, name: str, kind: str) -> str:
    """The item class of a new box, as the template's items.py holds the first ones."""
    return render(
        project.scaffold,
        "item_class.py.j2",
        cls=f"{camel(name)}{kind.capitalize()}Item",
        mixin="OutboxItemMixin" if kind == "outbox" else "InboxItemMixin",
        table=f"{name}_{kind}_items",
        event_types="",
    )
