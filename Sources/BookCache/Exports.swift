// BookCache's API speaks in DownloadQueue's types (progress, events, retry policy, transport),
// so importing BookCache is enough to use them.
@_exported import DownloadQueue
