//! The run header: what a result was measured on and how, printed at the top of every table
//! so that a number never travels without its device, driver, host, date and command.

use lookahead::Gpu;

/// The GPU a run measured and its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability, major * 10 + minor (`90`).
    pub compute_capability: u32,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// The driver's release (`580.159.04`) from [`Gpu::driver_release`], where Linux shows it.
    pub driver_release: Option<String>,
    /// The CUDA version the driver supports, from [`Gpu::driver_version`].
    pub cuda_version: (u32, u32),
}

impl Device {
    /// Queries `gpu` and its driver.
    pub fn query(gpu: &Gpu) -> lookahead::Result<Device> {
        Ok(Device {
            name: gpu.name().to_string(),
            compute_capability: gpu.compute_capability(),
            sms: gpu.capabilities()?.sm_count,
            driver_release: Gpu::driver_release(),
            cuda_version: gpu.driver_version()?,
        })
    }

    /// `NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)`.
    pub fn describe(&self) -> String {
        format!(
            "{} (sm_{}, {} SMs)",
            self.name, self.compute_capability, self.sms
        )
    }

    /// `580.159.04 (CUDA 13.0)`, or `unknown (CUDA 13.0)` without the release.
    pub fn driver(&self) -> String {
        let (major, minor) = self.cuda_version;
        format!(
            "{} (CUDA {major}.{minor})",
            self.driver_release.as_deref().unwrap_or("unknown")
        )
    }
}

/// What a run measured on and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHeader {
    /// The GPU, for runs that use one.
    pub device: Option<Device>,
    /// The host's CPU model and how many logical CPUs this process may use
    /// (`AMD EPYC 9454 48-Core Processor, 16 logical CPUs`).
    pub host: String,
    /// When the run started, UTC, RFC 3339 to the second.
    pub date: String,
    /// The command line as a shell would take it back: the program's file name (not its
    /// folder), then its arguments, quoted where needed.
    pub command: String,
}

impl RunHeader {
    /// The header of a run on `gpu`, dated now.
    pub fn for_gpu(gpu: &Gpu) -> lookahead::Result<RunHeader> {
        Ok(RunHeader {
            device: Some(Device::query(gpu)?),
            ..RunHeader::host_only()
        })
    }

    /// The header of a run that uses no GPU, dated now.
    pub fn host_only() -> RunHeader {
        RunHeader {
            device: None,
            host: host_cpu(),
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            command: command_line(),
        }
    }

    /// The header as Markdown list items, one a line: `device` and `driver` (with a GPU),
    /// `host`, `date`, `command`.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        if let Some(d) = &self.device {
            md += &format!("- device: {}\n- driver: {}\n", d.describe(), d.driver());
        }
        md += &format!(
            "- host: {}\n- date: {}\n- command: `{}`\n",
            self.host, self.date, self.command
        );
        md
    }
}

/// The host's CPU model (from `/proc/cpuinfo`, or `unknown CPU`) and how many logical CPUs
/// this process may use: `AMD EPYC 9454 48-Core Processor, 16 logical CPUs`.
fn host_cpu() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| cpu_model(&s))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {cpus} logical CPUs")
}

/// The `model name` of the first processor in `/proc/cpuinfo`'s text.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
}

/// This process's command line as a shell would take it back: the program's file name (not
/// its folder), then its arguments, quoted where needed.
fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    quote(std::iter::once(program).chain(args))
}

fn quote(words: impl Iterator<Item = String>) -> String {
    let words: Vec<String> = words.collect();
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lists_device_driver_host_date_and_command() {
        let h = RunHeader {
            device: Some(Device {
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: 90,
                sms: 132,
                driver_release: Some("580.159.04".into()),
                cuda_version: (13, 0),
            }),
            host: "AMD EPYC, 2 logical CPUs".into(),
            date: "2026-01-02T03:04:05Z".into(),
            command: "vs_cuda --reps 50".into(),
        };
        assert_eq!(
            h.markdown(),
            "- device: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)\n- driver: 580.159.04 (CUDA 13.0)\n\
             - host: AMD EPYC, 2 logical CPUs\n- date: 2026-01-02T03:04:05Z\n\
             - command: `vs_cuda --reps 50`\n"
        );
        let cpu_only = RunHeader::host_only();
        assert!(cpu_only.markdown().starts_with("- host: "));
        assert_eq!(cpu_only.date.len(), "2026-01-02T03:04:05Z".len());
    }

    #[test]
    fn finds_the_cpu_model_and_quotes_arguments() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC 9454: 48-Core\nflags\t: fpu\n";
        assert_eq!(cpu_model(info).as_deref(), Some("AMD EPYC 9454: 48-Core"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        let words = ["emu_speed", "--out", "my results/x.md"].map(String::from);
        assert_eq!(
            quote(words.into_iter()),
            "emu_speed --out 'my results/x.md'"
        );
        assert!(command_line().starts_with("lookahead_bench"));
    }
}
