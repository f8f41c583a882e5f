/// Something that reads a body's bytes as they are written to the file, for work that would
/// otherwise read the file back once it is whole — a book's validator checks a ZIP's entries as
/// they pass.
///
/// ``observe(_:at:)`` is called on a blocking-work thread, one call at a time and each finished
/// before the next, with the buffers just written and the file offset of their first byte. Every
/// attempt of the download calls it: an attempt that starts over from byte 0 starts at offset 0
/// again, a resumed one at the offset it resumes from. An observer that missed bytes (a resume
/// after a restart, bytes written by a failing attempt's flush) sees an offset it did not expect,
/// and must not vouch for what it has not seen.
package protocol BodyObserver: AnyObject, Sendable {
    /// Takes the buffers written at `offset`, in order. Should return quickly: the next batch
    /// waits behind it.
    func observe(_ buffers: [[UInt8]], at offset: Int64)
}
