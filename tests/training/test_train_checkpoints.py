"""Which checkpoint folders count as complete, and which old ones are deleted."""

import json
import os

from ftl_train import checkpoints as C


def _ckpt(root, step, complete=True, weights=True):
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if weights:
        (d / "model.safetensors").write_bytes(b"\0" * 16)
    if complete:
        C.mark_complete(str(d))
    return d


def test_newest_complete_skips_partial_folders(tmp_path):
    _ckpt(tmp_path, 4)
    _ckpt(tmp_path, 8)
    _ckpt(tmp_path, 12, complete=False)  # killed while writing
    (tmp_path / "checkpoint-16").mkdir()  # killed right after mkdir
    (tmp_path / "checkpoint-x").mkdir()  # not a checkpoint
    assert C.newest_complete(str(tmp_path)) == str(tmp_path / "checkpoint-8")
    assert C.newest_complete(str(tmp_path / "nothing")) is None


def test_marker_must_match_its_folder_and_files(tmp_path):
    d = _ckpt(tmp_path, 4)
    assert C.is_complete(str(d))
    # a marker copied from another step does not count
    moved = tmp_path / "checkpoint-5"
    d.rename(moved)
    assert not C.is_complete(str(moved))
    # a marker without the trainer state does not count
    e = _ckpt(tmp_path, 6)
    (e / "trainer_state.json").unlink()
    assert not C.is_complete(str(e))
    # a corrupt marker does not count
    f = _ckpt(tmp_path, 7)
    (f / C.COMPLETE_MARKER).write_text("{not json")
    assert not C.is_complete(str(f))


def test_rotation_counts_only_complete_and_keeps_best(tmp_path):
    for s in (2, 4, 6, 8):
        _ckpt(tmp_path, s)
    _ckpt(tmp_path, 3, complete=False)  # stale partial older than the newest complete
    _ckpt(tmp_path, 10, complete=False)  # being written now: never touched
    deleted = C.rotate(str(tmp_path), keep=2, best=str(tmp_path / "checkpoint-2"))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["checkpoint-10", "checkpoint-2", "checkpoint-6", "checkpoint-8"]
    assert sorted(d.rsplit("-", 1)[1] for d in deleted) == ["3", "4"]


def test_rotation_on_other_nodes_keeps_newest_by_step(tmp_path):
    for s in (2, 4, 6):
        d = tmp_path / f"checkpoint-{s}"
        d.mkdir()
        (d / "rng_state_9.pth").write_bytes(b"x")
    C.rotate(str(tmp_path), keep=1, best=None, saving_process=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-6"]


def test_marker_is_written_last_and_lists_files(tmp_path):
    d = _ckpt(tmp_path, 4)
    info = json.loads((d / C.COMPLETE_MARKER).read_text())
    assert info["step"] == 4 and "model.safetensors" in info["files"]
    assert not any(p.name.startswith(".ftl_tmp") for p in d.iterdir())


def test_weights_saved_under_legacy_names_are_restored(tmp_path):
    """transformers 5.3 (the training image) saves BERT LayerNorms as gamma/beta and its
    non-strict resume would keep the starting values; the entrypoint puts them back."""
    import torch
    import transformers
    from safetensors.torch import save_file

    from ftl_train.trainer import restore_renamed_weights

    cfg = transformers.BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=20,
    )
    model = transformers.BertForSequenceClassification(cfg)
    trained = {k: v.clone() + 0.5 for k, v in model.state_dict().items()}
    legacy = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): v
        for k, v in trained.items()
    }
    assert any(k.endswith(".gamma") for k in legacy)
    save_file({k: v.contiguous() for k, v in legacy.items()}, str(tmp_path / "model.safetensors"))
    model.load_state_dict(legacy, strict=False)  # what the Trainer's resume does
    key = "bert.embeddings.LayerNorm.weight"
    assert not torch.equal(model.state_dict()[key], trained[key])
    n = restore_renamed_weights(model, str(tmp_path))
    assert n == sum(1 for k in legacy if k.endswith((".gamma", ".beta")))
    assert all(torch.equal(model.state_dict()[k], trained[k]) for k in trained)
    assert restore_renamed_weights(model, str(tmp_path / "missing")) == 0


def test_best_checkpoint_is_derived_from_the_steps_not_from_a_race(tmp_path):
    # Issue 34: the step being saved names its own folder before anything has written it;
    # an older best step names its folder while it is there (a null recorded by the racy
    # check is repaired); without a best step the recorded value stands.
    run = str(tmp_path)
    here = os.path.join(run, "checkpoint-40")
    assert C.best_checkpoint(run, 40, 40, None) == here
    assert C.best_checkpoint(run, 40, 40, os.path.join(run, "checkpoint-20")) == here
    assert C.best_checkpoint(run, 20, 40, None) is None  # no folder: nothing to load
    os.makedirs(os.path.join(run, "checkpoint-20"))
    assert C.best_checkpoint(run, 20, 40, None) == os.path.join(run, "checkpoint-20")
    assert C.best_checkpoint(run, None, 40, "kept") == "kept"
    assert C.best_checkpoint(run, 0, 40, None) is None
