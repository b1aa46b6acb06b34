//! A list kept inline while it is short (ordinary hellos), on the heap beyond: the parse and the
//! fingerprints of a hello then allocate nothing for their lists.

/// Values kept on the stack while they fit (ordinary hellos), on the heap beyond.
#[derive(Clone, Debug)]
pub(crate) struct Small<T, const N: usize> {
    stack: [T; N],
    len: usize,
    heap: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Small<T, N> {
    pub(crate) fn new() -> Self {
        Self {
            stack: [T::default(); N],
            len: 0,
            heap: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        if self.heap.is_empty() {
            if let Some(slot) = self.stack.get_mut(self.len) {
                *slot = v;
                self.len += 1;
                return;
            }
            self.heap.extend_from_slice(&self.stack);
        }
        self.heap.push(v);
    }

    /// Sorts the values in place.
    pub(crate) fn sort(&mut self)
    where
        T: Ord,
    {
        if self.heap.is_empty() {
            if let Some(values) = self.stack.get_mut(..self.len) {
                values.sort_unstable();
            }
        } else {
            self.heap.sort_unstable();
        }
    }

    /// Fills `self` with `values` sorted ascending.
    pub(crate) fn sort_from(&mut self, values: &[T])
    where
        T: Ord,
    {
        self.len = 0;
        self.heap.clear();
        match self.stack.get_mut(..values.len()) {
            Some(dst) => {
                dst.copy_from_slice(values);
                dst.sort_unstable();
                self.len = values.len();
            }
            None => {
                self.heap.extend_from_slice(values);
                self.heap.sort_unstable();
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        if self.heap.is_empty() {
            self.stack.get(..self.len).unwrap_or_default()
        } else {
            &self.heap
        }
    }
}

/// Equal when the values are.
impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for Small<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for Small<T, N> {}
