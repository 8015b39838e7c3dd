use super::*;

fn err(text: &str) -> String {
    ClusterConfig::parse(text).unwrap_err().to_string()
}

#[test]
fn simplest_static_cluster_takes_the_defaults() {
    let c = ClusterConfig::parse("[cluster]\nmembers = [\"127.0.0.1:7420\", \"127.0.0.1:7421\"]\n")
        .unwrap();
    assert_eq!(c.name, "dafs");
    assert_eq!(c.policy, Policy::Matched);
    assert_eq!(c.lease_ttl_s, LEASE_TTL_S_DEFAULT);
    assert_eq!(c.etcd_timeout, Duration::from_millis(ETCD_TIMEOUT_MS_DEFAULT));
    let map = c.static_map().unwrap();
    assert_eq!(map.epoch(), 1);
    assert_eq!(map.members().len(), 2);
    assert_eq!(map.members()[0].id.as_str(), "127.0.0.1:7420");
    assert_eq!(map.members()[0].addr, "127.0.0.1:7420");
}

#[test]
fn members_with_ids_policy_epoch() {
    let c = ClusterConfig::parse(
        r#"[cluster]
members = ["127.0.0.1:7420", { id = "n2", addr = "127.0.0.1:7421" }]
epoch = 4
policy = "round-robin"
hash = "rendezvous"
"#,
    )
    .unwrap();
    let map = c.static_map().unwrap();
    assert_eq!(map.epoch(), 4);
    assert_eq!(map.policy(), Policy::RoundRobin);
    let n2 = map.member(&NodeId::new("n2").unwrap()).unwrap();
    assert_eq!(n2.addr, "127.0.0.1:7421");
}

#[test]
fn etcd_cluster() {
    let c = ClusterConfig::parse(
        r#"[cluster]
etcd = "http://127.0.0.1:2379"
name = "prod-1"
lease_ttl_s = 3
etcd_timeout_ms = 500
epoch_poll_interval_ms = 50
"#,
    )
    .unwrap();
    assert_eq!(c.membership, Membership::Etcd { endpoints: vec!["127.0.0.1:2379".into()] });
    assert_eq!(c.name, "prod-1");
    assert_eq!(c.lease_ttl_s, 3);
    assert_eq!(c.epoch_poll_interval, Duration::from_millis(50));
    assert!(c.static_map().is_none());
    let many = ClusterConfig::parse("[cluster]\netcd = [\"http://a\", \"http://b:1/\"]\n").unwrap();
    assert_eq!(
        many.membership,
        Membership::Etcd { endpoints: vec!["a:2379".into(), "b:1".into()] }
    );
}

#[test]
fn mistakes_get_clear_errors() {
    assert!(err("[cluster\n").contains("cluster.toml:"));
    assert_eq!(err(""), "cluster.toml: no [cluster] table");
    assert!(err("[cluster]\npolicy = \"matched\"\n").contains("give either members"));
    assert!(
        err("[cluster]\nmembers = [\"a:1\"]\netcd = \"http://e\"\n").contains("exclude each other")
    );
    assert!(err("[cluster]\nmembers = []\n").contains("at least one member"));
    assert!(err("[cluster]\nmembers = [\"a:1\", \"a:1\"]\n").contains("appears twice"));
    assert!(err("[cluster]\nmembers = [\"a:1\"]\npolicy = \"random\"\n")
        .contains("unknown placement policy"));
    assert!(err("[cluster]\nmembers = [\"a:1\"]\nhash = \"jump\"\n").contains("unknown hash"));
    assert!(err("[cluster]\nmembers = [\"a:1\"]\nmembres = 1\n").contains("unknown field"));
    assert!(err("[cluster]\nmembers = [\"a b\"]\n").contains("invalid node id"));
    assert!(err("[cluster]\netcd = \"127.0.0.1:2379\"\n").contains("expected http://host:port"));
    assert!(err("[cluster]\netcd = \"https://e\"\n").contains("https is not supported"));
    assert!(err("[cluster]\netcd = []\n").contains("give either members"));
    assert!(err("[cluster]\netcd = \"http://e:99999\"\n").contains("expected http://host:port"));
    assert!(
        err("[cluster]\nmembers = [\"a:1\"]\nname = \"a/b\"\n").contains("invalid cluster name")
    );
    assert!(err("[cluster]\netcd = \"http://e\"\nepoch = 3\n").contains("epoch is kept in etcd"));
    assert!(err("[cluster]\netcd = \"http://e\"\nlease_ttl_s = 3\n")
        .contains("more than a third of lease_ttl_s"));
    // The same timing is fine once the timeout fits, and never matters statically.
    assert!(ClusterConfig::parse(
        "[cluster]\netcd = \"http://e\"\nlease_ttl_s = 3\netcd_timeout_ms = 1000\n"
    )
    .is_ok());
    assert!(ClusterConfig::parse("[cluster]\nmembers = [\"a:1\"]\nlease_ttl_s = 1\n").is_ok());
    assert_eq!(
        err("[cluster]\nmembers = [\"a:1\"]\nlease_ttl_s = 0\n"),
        "cluster.toml: lease_ttl_s = 0 is out of range 1..=3600"
    );
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cluster.toml");
    std::fs::write(&p, "[cluster]\nmembers = [\"127.0.0.1:7420\"]\n").unwrap();
    assert!(ClusterConfig::load(&p).unwrap().static_map().is_some());
    let missing = dir.path().join("nope.toml");
    assert!(ClusterConfig::load(&missing).unwrap_err().to_string().contains("nope.toml"));
}

#[test]
fn placement_is_the_policy_and_the_block_cache_is_bounded() {
    let two = "members = [\"127.0.0.1:7420\", \"127.0.0.1:7421\"]";
    let c =
        ClusterConfig::parse(&format!("[cluster]\n{two}\nplacement = \"round-robin\"\n")).unwrap();
    assert_eq!(c.policy, Policy::RoundRobin);
    assert_eq!(c.block_cache_bytes, None);
    let c = ClusterConfig::parse(&format!("[cluster]\n{two}\nblock_cache_bytes = 0\n")).unwrap();
    assert_eq!((c.policy, c.block_cache_bytes), (Policy::Matched, Some(0)));
    let both = format!("[cluster]\n{two}\nplacement = \"matched\"\npolicy = \"matched\"\n");
    assert!(err(&both).contains("give one"), "{}", err(&both));
    let huge = format!("[cluster]\n{two}\nblock_cache_bytes = {}\n", BLOCK_CACHE_BYTES_MAX + 1);
    assert!(err(&huge).contains("block_cache_bytes"), "{}", err(&huge));
    let bad = format!("[cluster]\n{two}\nplacement = \"random\"\n");
    assert!(err(&bad).contains("random"), "{}", err(&bad));
}
