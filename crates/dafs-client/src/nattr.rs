//! Named attributes by path (the handle-based twins are in `at`).

use dafs_proto::{Opcode, Reply, Request};

use crate::error::unexpected_reply;
use crate::{Client, Result};

impl Client {
    /// A named attribute's value (`NoAttr` status if absent).
    pub fn get_nattr(&mut self, path: &str, name: &str) -> Result<Vec<u8>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.get_nattr(path, name);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::GetNamedAttr { fh, name: name.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttr { value } => Ok(value.to_vec()),
            _ => Err(unexpected_reply(Opcode::GetNamedAttr)),
        }
    }

    /// Set a named attribute (`flags`: [`dafs_proto::types::nattr_flags`]).
    pub fn set_nattr(&mut self, path: &str, name: &str, value: &[u8], flags: u32) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.set_nattr(path, name, value, flags);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::SetNamedAttr { fh, flags, name: name.as_bytes(), value })?;
        self.decode(&m).map(|_| ())
    }

    pub fn list_nattr(&mut self, path: &str) -> Result<Vec<String>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.list_nattr(path);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::ListNamedAttr { fh })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttrList { names } => Ok(names
                .split(|&b| b == 0)
                .filter(|n| !n.is_empty())
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect()),
            _ => Err(unexpected_reply(Opcode::ListNamedAttr)),
        }
    }

    pub fn remove_nattr(&mut self, path: &str, name: &str) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.remove_nattr(path, name);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::RemoveNamedAttr { fh, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }
}
