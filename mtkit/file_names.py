"""The names of the files mtkit writes and reads in a data directory, a run directory and an export, each written
once here (tests/test_file_names.py finds no other spelling of them in mtkit/). Constants only: it imports nothing.
"""

from __future__ import annotations

# Shared by a data directory, the run directory trained on it and every export of that run.
SPM_NAME = "spm.model"  # the sentencepiece model (or mtkit's bundle of an imported model's two)
MANIFEST_NAME = "manifest.json"  # what preprocess wrote; a run directory holds its data directory's
# A data directory preprocessed for term hints: a training split's word alignments (mtkit.corpus.term_alignments),
# {split}.links.bin and .idx beside its binarized text, and .json, their record, written last.
LINKS_NAME = "{split}.links"

# A run directory (mtkit.runs.directory); its checkpoints (mtkit.runs.checkpoint_files).
CONFIG_NAME = "config.json"  # the resolved recipe
RECIPE_NAME = "recipe.toml"  # an imported model's settings, for `train -c ... --init-from`
METRICS_NAME = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"
AVERAGE_NAME = "average.pt"
SHORTLIST_NAME = "shortlist.txt"  # the lexical shortlist, CTranslate2's vocabulary-map format
SHORTLIST_INFO = "shortlist.json"  # how it was made: settings, corpus, the sentencepiece model it belongs to

# An export (`mtkit export`) and the CTranslate2 engine's cache of one.
METADATA_NAME = "mtkit.json"  # written beside every exported model: format, checkpoint, settings, model config
README_NAME = "README.md"  # how to use the export without mtkit
MODEL_NAME = "model.bin"  # CTranslate2's model file
VMAP_NAME = "vmap.txt"  # where CTranslate2 keeps a model's vocabulary map (ModelSpec.register_vocabulary_mapping)
CACHE_KEY_NAME = "cache.json"  # written last in the cache: a cache without it (an export cut short) is not used
