use super::*;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_skill_loads_its_instructions_and_files_and_a_later_directory_replaces_it() {
    let user = tempfile::tempdir().expect("dir");
    write(
        user.path(),
        "skills/release-notes/SKILL.md",
        "---\nname: release-notes\ndescription: Writes release notes from the git log.\nlicense: MIT\n---\n\
         Read templates/notes.md, then run git log.\n",
    );
    write(
        user.path(),
        "skills/release-notes/templates/notes.md",
        "## Changes\n",
    );
    write(
        user.path(),
        "skills/release-notes/scripts/tags.sh",
        "git tag --list\n",
    );
    write(
        user.path(),
        "skills/not-a-skill/README.md",
        "no SKILL.md here\n",
    );
    let (skills, errors) = load_skills(user.path(), Skills::new());
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<&str> = skills.list().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["release-notes"]);
    let skill = skills.get("release-notes").expect("loaded");
    assert_eq!(skill.description, "Writes release notes from the git log.");
    assert_eq!(skill.body, "Read templates/notes.md, then run git log.");
    let files: Vec<(&str, &str)> = skill
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.content.as_str()))
        .collect();
    assert_eq!(
        files,
        [
            ("scripts/tags.sh", "git tag --list\n"),
            ("templates/notes.md", "## Changes\n")
        ]
    );

    let project = tempfile::tempdir().expect("dir");
    write(
        project.path(),
        "skills/release-notes/SKILL.md",
        "---\nname: release-notes\ndescription: Our own notes.\n---\nUse the changelog.\n",
    );
    let (skills, errors) = load_skills(project.path(), skills);
    assert!(errors.is_empty(), "{errors:?}");
    let skill = skills.get("release-notes").expect("replaced");
    assert_eq!(
        (skill.description.as_str(), skill.files.len()),
        ("Our own notes.", 0)
    );
}

#[test]
fn a_bad_skill_is_reported_naming_its_file_and_key_and_the_others_load() {
    let dir = tempfile::tempdir().expect("dir");
    write(
        dir.path(),
        "skills/good/SKILL.md",
        "---\nname: good\ndescription: fine\n---\nDo it.\n",
    );
    write(
        dir.path(),
        "skills/misnamed/SKILL.md",
        "---\nname: other\ndescription: d\n---\nx\n",
    );
    write(
        dir.path(),
        "skills/undescribed/SKILL.md",
        "---\nname: undescribed\n---\nx\n",
    );
    write(
        dir.path(),
        "skills/Upper/SKILL.md",
        "---\nname: Upper\ndescription: d\n---\nx\n",
    );
    write(
        dir.path(),
        "skills/typo/SKILL.md",
        "---\nname: typo\ndescription: d\nmodle: x\n---\nx\n",
    );
    write(
        dir.path(),
        "skills/big/SKILL.md",
        "---\nname: big\ndescription: d\n---\nx\n",
    );
    write(
        dir.path(),
        "skills/big/data.txt",
        &"x".repeat(MAX_SKILL_FILE_BYTES + 1),
    );
    let (skills, errors) = load_skills(dir.path(), Skills::new());
    let names: Vec<&str> = skills.list().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let mut reported: Vec<(String, Option<String>)> = errors
        .iter()
        .map(|e| (e.file.clone(), e.key.clone()))
        .collect();
    reported.sort();
    assert_eq!(
        reported,
        [
            ("skills/Upper/SKILL.md".to_owned(), Some("name".to_owned())),
            ("skills/big/SKILL.md".to_owned(), None),
            (
                "skills/misnamed/SKILL.md".to_owned(),
                Some("name".to_owned())
            ),
            ("skills/typo/SKILL.md".to_owned(), Some("modle".to_owned())),
            (
                "skills/undescribed/SKILL.md".to_owned(),
                Some("description".to_owned())
            ),
        ]
    );
    let big = errors
        .iter()
        .find(|e| e.file == "skills/big/SKILL.md")
        .expect("reported");
    assert!(big.message.contains("data.txt"), "{}", big.message);
}

#[test]
fn names_are_lowercase_words_joined_by_hyphens() {
    for good in ["a", "pdf", "release-notes", "v2-api"] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", "-a", "a-", "A", "a_b", "a b", &"a".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}
