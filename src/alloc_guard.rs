//! A global allocator that keeps absurd allocation requests from aborting the process.
//!
//! The `kafka-protocol` crate sizes a `Vec` from an array count read off the wire before it reads
//! any element: a 12-byte Produce body claiming `i32::MAX` topics asks for hundreds of GiB. With the
//! system allocator that request fails and Rust aborts the whole broker; an abort cannot be caught.
//!
//! Requests of at least [`HUGE`] bytes are served by an anonymous `MAP_NORESERVE` mapping instead:
//! the kernel hands out address space without committing memory, the decoder then fails on the
//! first missing element, and the mapping is released untouched. Only pages actually written use
//! memory, and a decoder can write no more than the frame it reads, which is bounded by
//! `socket.request.max.bytes`. Everything smaller goes to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at or above this size are mapped lazily (1 GiB).
pub const HUGE: usize = 1 << 30;

/// The broker's global allocator. Thread-safe (stateless).
pub struct GuardedAllocator;

fn page_aligned(layout: &Layout) -> bool {
    layout.align() <= 4096
}

unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE && page_aligned(&layout) {
            map_lazily(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE && page_aligned(&layout) {
            // Fresh anonymous mappings are already zero-filled.
            map_lazily(layout.size())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= HUGE && page_aligned(&layout) {
            libc::munmap(ptr as *mut libc::c_void, layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_huge = layout.size() >= HUGE && page_aligned(&layout);
        let new_huge = new_size >= HUGE && page_aligned(&layout);
        if !old_huge && !new_huge {
            return System.realloc(ptr, layout, new_size);
        }
        let new_layout = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => l,
            Err(_) => return std::ptr::null_mut(),
        };
        let new_ptr = self.alloc(new_layout);
        if !new_ptr.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new_ptr
    }
}

unsafe fn map_lazily(size: usize) -> *mut u8 {
    let p = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p as *mut u8
    }
}
