//! What a watched process spent, from `/proc` (proc(5)): CPU time and resident memory.

use anyhow::Context as _;

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, 100 on every Linux
/// architecture the harness runs on (`getconf CLK_TCK`).
const TICKS_PER_S: f64 = 100.0;

/// User + system CPU seconds of process `pid`, all its threads (utime and stime, fields 14 and
/// 15 of `/proc/<pid>/stat`).
///
/// # Errors
/// No such process, or a line that does not parse.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it are counted from its `)`.
    let rest = stat.rsplit_once(')').context("no ) in stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("a short stat line")?.parse::<u64>()? as f64)
    };
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    Ok((tick(11)? + tick(12)?) / TICKS_PER_S)
}

/// Resident memory of process `pid`, KiB (`VmRSS` of `/proc/<pid>/status`).
///
/// # Errors
/// No such process, or no `VmRSS` line.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .context("no VmRSS")?;
    Ok(line.trim().trim_end_matches("kB").trim().parse()?)
}

/// Pages of memory the kernel's TCP sockets hold, machine-wide (`mem` of `/proc/net/sockstat`).
///
/// # Errors
/// No `TCP:` line with `mem`.
pub fn tcp_mem_pages() -> anyhow::Result<u64> {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat")?;
    let line = sockstat
        .lines()
        .find_map(|line| line.strip_prefix("TCP:"))
        .context("no TCP line")?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "mem").context("no mem")?;
    Ok(words.get(at + 1).context("no mem value")?.parse()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        let spent = cpu_seconds(pid).unwrap();
        assert!((0.0..3600.0).contains(&spent), "{spent}");
        assert!(rss_kib(pid).unwrap() > 0);
        tcp_mem_pages().unwrap();
        assert!(cpu_seconds(u32::MAX).is_err());
    }
}
