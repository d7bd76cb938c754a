use super::*;
use crate::builtin;

fn command(subtask: Option<bool>) -> Command {
    Command {
        name: "review".into(),
        description: Some("Review code".into()),
        agent: None,
        subtask,
        model: None,
        template: "Review the changes in $1".into(),
    }
}

fn agent(mode: AgentMode) -> AgentSpec {
    let mut agent = builtin::general();
    agent.mode = mode;
    agent
}

#[test]
fn subtask_rule_of_seed_000() {
    use AgentMode::*;
    use CommandMode::{Prompt, Subtask};
    // (command.subtask, agent.mode) -> mode
    let table = [
        (None, Subagent, Subtask),
        (None, Primary, Prompt),
        (None, All, Prompt),
        (Some(true), Subagent, Subtask),
        (Some(true), Primary, Subtask),
        (Some(true), All, Subtask),
        (Some(false), Subagent, Prompt),
        (Some(false), Primary, Prompt),
        (Some(false), All, Prompt),
    ];
    for (subtask, mode, expected) in table {
        assert_eq!(
            command_mode(&command(subtask), &agent(mode)),
            expected,
            "subtask {subtask:?}, agent mode {mode:?}"
        );
    }
}

#[test]
fn render_fills_arguments_and_positions() {
    assert_eq!(render("a=$1 b=$2 c=$9.", "x"), "a=x b= c=.");
    assert_eq!(render("cost: $0 or $$ or $x", ""), "cost: $0 or $$ or $x");
    assert_eq!(render("$1$1", "ab"), "abab");
}

#[test]
fn the_last_placeholder_takes_the_rest_of_the_arguments() {
    // Seed 000's example.
    assert_eq!(
        render("Find all $1 in the codebase", "TypeScript files"),
        "Find all TypeScript files in the codebase"
    );
    assert_eq!(
        render("Compare $1 with $2.", "a.rs b.rs c.rs"),
        "Compare a.rs with b.rs c.rs."
    );
    // Only the highest-numbered placeholder takes the rest, wherever it stands.
    assert_eq!(render("$2 then $1", "x y z"), "y z then x");
    // A quoted argument stays one word.
    assert_eq!(
        render("Rename $1 to $2", r#""old name" "new name" "#),
        "Rename old name to new name"
    );
    assert_eq!(
        render("Review $1 for $2", r#""src/app.ts" error handling"#),
        "Review src/app.ts for error handling"
    );
    assert_eq!(
        render(
            "Review $1 for $2; all: $ARGUMENTS",
            r#"src/app.ts "error handling" "#
        ),
        r#"Review src/app.ts for error handling; all: src/app.ts "error handling""#
    );
}

#[test]
fn render_appends_arguments_to_a_template_without_placeholders() {
    assert_eq!(
        render("Run the tests.", "  only unit  "),
        "Run the tests.\n\nonly unit"
    );
    assert_eq!(render("Run the tests.", "  "), "Run the tests.");
}

#[test]
fn subtask_part_renders_the_template_for_the_agent() {
    let part = command(None).subtask_part(&builtin::explore(), "src/lib.rs");
    assert_eq!(
        part,
        SubtaskPart {
            agent: "explore".into(),
            description: "Review code".into(),
            prompt: "Review the changes in src/lib.rs".into(),
            command: Some("/review".into()),
        }
    );
}

#[test]
fn a_subtask_of_a_command_without_a_description_has_an_empty_one() {
    let mut undescribed = command(None);
    undescribed.description = None;
    let part = undescribed.subtask_part(&builtin::explore(), "src/lib.rs");
    assert_eq!(part.description, "");
    assert_eq!(part.command.as_deref(), Some("/review"));
}

fn load(files: &[(&str, &str)]) -> (CommandRegistry, Vec<LoadError>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let commands = dir.path().join("commands");
    std::fs::create_dir(&commands).expect("mkdir");
    for (name, text) in files {
        std::fs::write(commands.join(name), text).expect("write");
    }
    load_commands(&commands)
}

#[test]
fn command_files_load_with_per_file_errors() {
    let (registry, errors) = load(&[
        (
            "review.md",
            "---\ndescription: Review code\nagent: build\nsubtask: true\nmodel: big\n---\nReview $1\n",
        ),
        ("explore.md", "---\nagent: explore\n---\nFind all $1"),
        ("plain.md", "Just do $ARGUMENTS"),
        ("bad.md", "---\nsubtask: sometimes\n---\nx"),
        ("typo.md", "---\nagnet: build\n---\nx"),
        ("empty.md", "---\nagent: build\n---\n"),
        ("Bad Name.md", "x"),
    ]);
    let names: Vec<_> = registry.list().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["explore", "plain", "review"]);
    let review = registry.get("/review").expect("by slash name");
    assert_eq!(review.subtask, Some(true));
    assert_eq!(review.agent.as_ref().map(AgentName::as_str), Some("build"));
    assert_eq!(review.model.as_deref(), Some("big"));
    assert_eq!(review.template, "Review $1");
    assert_eq!(registry.get("plain").and_then(|c| c.agent.as_ref()), None);

    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(
        messages[0].starts_with("commands/Bad Name.md: invalid command name"),
        "{}",
        messages[0]
    );
    assert_eq!(
        messages[1],
        "commands/bad.md: key `subtask`: expected true or false, found \"sometimes\""
    );
    assert_eq!(
        messages[2],
        "commands/empty.md: the command has no template (the body is empty)"
    );
    assert!(
        messages[3].starts_with("commands/typo.md: key `agnet`: unknown key"),
        "{}",
        messages[3]
    );
}

#[test]
fn a_missing_commands_directory_is_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (registry, errors) = load_commands(&dir.path().join("nope"));
    assert!(registry.list().is_empty() && errors.is_empty());
}
