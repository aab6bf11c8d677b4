import pytest

from models.errors import ConfigError
from models.output import check_output_path


def test_an_output_path_is_checked_and_its_folder_made_before_any_work(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    check_output_path(tmp_path / "new" / "deeper" / "out.jsonl", source)
    assert (tmp_path / "new" / "deeper").is_dir()  # made now, so nothing is found missing after the slow part
    with pytest.raises(ConfigError, match=r"--out .*in\.jsonl is the input file"):
        check_output_path(source, source)
    with pytest.raises(ConfigError, match="is a folder; name a file in it"):
        check_output_path(tmp_path, source)
    with pytest.raises(ConfigError, match=r"--json .*in\.jsonl/r\.json: .*in\.jsonl is a file, not a folder"):
        check_output_path(source / "r.json", option="--json")
    with pytest.raises(ConfigError, match="may hold labels"):
        check_output_path(source, keep_existing="labels")
