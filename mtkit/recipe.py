"""Recipes: the [preprocess]/[model]/[train]/[translate]/[modifiers]/[term_hints] sections as typed configs.

Load order: model preset (`--arch` or `model.arch`) -> recipe TOML -> `--set section.key=value` overrides;
for preprocess: recipe TOML -> the command-line options given. Unknown keys and wrongly typed values are
UserErrors that list what is valid.
"""

from __future__ import annotations

import ast
import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.console import log
from mtkit.corpus.config import PreprocessConfig
from mtkit.corpus.modifiers import ModifiersConfig
from mtkit.corpus.term_hints import TermHintsConfig
from mtkit.errors import UserError, check
from mtkit.model.transformer import ModelConfig
from mtkit.search.config import TranslateConfig
from mtkit.training.config import TrainConfig

SECTIONS = ("preprocess", "model", "train", "translate", "modifiers", "term_hints")
# [preprocess] keys naming the data. Data named on the command line replaces the recipe's rather than
# joining it: a run on one's own files must not also read the recipe's Hugging Face corpus.
FILE_DATA_KEYS = ("train", "valid", "test", "corpora")
HF_DATA_KEYS = ("hf_dataset", "hf_config", "hf_splits")


@dataclass
class Recipe:
    model: ModelConfig
    train: TrainConfig
    translate: TranslateConfig
    preprocess: dict[str, Any] = field(default_factory=dict)
    modifiers: ModifiersConfig = field(default_factory=ModifiersConfig)  # a run recorded without it: all off
    term_hints: TermHintsConfig = field(default_factory=TermHintsConfig)  # a run recorded without it: off

    def as_dict(self) -> dict[str, Any]:
        return {
            "preprocess": dict(self.preprocess),
            "model": dataclasses.asdict(self.model),
            "train": dataclasses.asdict(self.train),
            "translate": dataclasses.asdict(self.translate),
            "modifiers": dataclasses.asdict(self.modifiers),
            "term_hints": dataclasses.asdict(self.term_hints),
        }


def read_recipe_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Parse a recipe TOML; unknown sections are an error."""
    path = Path(path)
    check(path.is_file(), f"{path}: no such recipe file")
    try:
        sections = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: invalid TOML ({exc})") from None
    for name, value in sections.items():
        check(
            name in SECTIONS and isinstance(value, dict),
            f"{path}: unknown section [{name}]; valid: {', '.join(SECTIONS)}",
        )
    return sections


def parse_override(text: str) -> tuple[str, str, Any]:
    """`train.lr=7e-4` -> ("train", "lr", 0.0007); values are Python literals, else plain strings."""
    check("=" in text and "." in text.split("=", 1)[0], f"--set {text!r}: expected section.key=value")
    dotted, raw = text.split("=", 1)
    section, key = dotted.strip().split(".", 1)
    check(section in SECTIONS, f"--set {text!r}: unknown section {section!r}; valid: {', '.join(SECTIONS)}")
    if raw.strip() in ("true", "false"):  # TOML spelling, as in the recipe files
        return section, key.strip(), raw.strip() == "true"
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return section, key.strip(), value


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check `value` against a dataclass field's type hint, widening int->float and list->tuple."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, where)
            except UserError as exc:
                errors.append(str(exc))
        raise UserError(errors[0])
    if origin is tuple:
        check(isinstance(value, (list, tuple)) and len(value) == len(args), f"{where}: expected {len(args)} numbers")
        return tuple(coerce(v, a, where) for v, a in zip(value, args))
    if origin is list:
        check(isinstance(value, (list, tuple)), f"{where}: expected a list")
        return [coerce(v, args[0], where) for v in value] if args else list(value)
    if origin is dict:
        check(isinstance(value, dict), f"{where}: expected a table")
        return dict(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    ok = isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    check(ok, f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")
    return value


def section_keys(cls: type) -> dict[str, Any]:
    """The keys of dataclass `cls`'s section -> their type hints: its fields, where a field is itself a config
    (PreprocessConfig.cleaning) that config's keys in its place, flat in the section as they always were."""
    hints = typing.get_type_hints(cls)
    keys: dict[str, Any] = {}
    for f in (f for f in dataclasses.fields(cls) if f.init):
        hint = hints[f.name]
        keys.update(section_keys(hint) if dataclasses.is_dataclass(hint) else {f.name: hint})
    return keys


def typed_values(cls: type, values: dict[str, Any], section: str) -> dict[str, Any]:
    """`values` checked against the keys of dataclass `cls`'s section: an unknown key or a wrong type is a UserError."""
    hints = section_keys(cls)
    for key in values:
        check(key in hints, f"unknown key {section}.{key}; valid keys: {', '.join(hints)}")
    return {k: coerce(v, hints[k], f"{section}.{k}") for k, v in values.items()}


def build_config(cls: type, values: dict[str, Any], section: str, base: Any = None) -> Any:
    """Instantiate dataclass `cls` from `values` over `base` (or defaults), strictly typed. A config refuses a bad
    value itself (UserError naming the field); one it holds (cleaning) names the field after the section."""
    current = dataclasses.asdict(base) if base is not None else {}
    current.update(typed_values(cls, values, section))
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner = hints[f.name]
        if f.init and dataclasses.is_dataclass(inner):
            own = {key: current.pop(key) for key in section_keys(inner) if key in current}
            try:
                current[f.name] = inner(**own)
            except UserError as exc:
                raise UserError(f"{section}.{exc}") from None
    try:
        return cls(**current)
    except TypeError as exc:
        raise UserError(f"[{section}]: {exc}") from None


def resolve_recipe(
    path: str | Path | None = None,
    arch: str | None = None,
    overrides: list[str] | None = None,
    vocab_size: int | None = None,
) -> Recipe:
    """Build the run's configuration from preset, recipe file and overrides."""
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    if path is not None:
        for name, values in read_recipe_file(path).items():
            sections[name].update(values)
    for text in overrides or []:
        section, key, value = parse_override(text)
        sections[section][key] = value
    model_values = dict(sections["model"])
    preset = arch or model_values.pop("arch", None) or "small"
    model_values.pop("arch", None)
    vocab = (
        vocab_size
        or model_values.pop("vocab_size", None)
        or sections["preprocess"].get("vocab_size", PreprocessConfig.vocab_size)
    )
    try:
        base_model = ModelConfig.preset(preset, vocab_size=int(vocab))
    except (UserError, ValueError) as exc:  # ValueError: a vocab_size that is no number
        raise UserError(f"--arch {preset}: {exc}") from None
    train = build_config(TrainConfig, sections["train"], "train")
    return Recipe(
        model=build_config(ModelConfig, model_values, "model", base_model),
        train=train.resolved(base_model.d_model if "d_model" not in model_values else model_values["d_model"]),
        translate=build_config(TranslateConfig, sections["translate"], "translate"),
        preprocess=typed_values(PreprocessConfig, sections["preprocess"], "preprocess"),
        modifiers=build_config(ModifiersConfig, sections["modifiers"], "modifiers"),
        term_hints=build_config(TermHintsConfig, sections["term_hints"], "term_hints"),
    )


def resolve_preprocess(path: str | Path | None, given: dict[str, Any]) -> PreprocessConfig:
    """The recipe's [preprocess] section (when `path` is given) with `given`, the options set on the
    command line, over it.

    Data named in `given` replaces the recipe's: files (train/valid/test) replace all of its data keys,
    an hf_dataset its files (its hf_config and hf_splits still apply unless given too).
    """
    recipe = read_recipe_file(path).get("preprocess", {}) if path is not None else {}
    recipe = typed_values(PreprocessConfig, recipe, "preprocess")
    replaced: tuple[str, ...] = ()
    if any(key in given for key in FILE_DATA_KEYS):
        replaced = FILE_DATA_KEYS + HF_DATA_KEYS
    elif "hf_dataset" in given:
        replaced = FILE_DATA_KEYS
    unused = [key for key in replaced if key in recipe and key not in given]
    if unused:
        log(f"data given on the command line: the recipe's {', '.join(unused)} not used")
    values = {**{k: v for k, v in recipe.items() if k not in unused}, **given}
    check(
        values.get("corpora") or ("source_lang" in values and "target_lang" in values),
        "no languages: give --source-lang and --target-lang, "
        "or source_lang and target_lang in the recipe's [preprocess]",
    )
    return build_config(PreprocessConfig, values, "preprocess")


def resolve_term_hints(path: str | Path | None) -> TermHintsConfig:
    """The recipe's [term_hints] section (off without a recipe): `mtkit preprocess` reserves the hints' pieces and
    aligns the training corpora when it is on."""
    values = read_recipe_file(path).get("term_hints", {}) if path is not None else {}
    return build_config(TermHintsConfig, values, "term_hints")
