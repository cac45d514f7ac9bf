//! docs/workload-keys.md is the page `lockcheck::run::workload::keys` makes: every
//! key of a workload file, its type, default, allowed values and meaning (the
//! library's tests hold that table to the reader both ways).

mod docs_support;

#[test]
fn the_workload_keys_page_is_the_one_the_table_makes() {
    docs_support::generated_page(
        "docs/workload-keys.md",
        &lockcheck::run::workload::keys::markdown(),
        "workload_keys_doc",
    );
}

#[test]
fn the_workloads_page_links_the_keys_page() {
    let page = docs_support::read("docs/workloads.md");
    assert!(
        page.contains("(workload-keys.md)"),
        "docs/workloads.md links no workload-keys.md"
    );
}
