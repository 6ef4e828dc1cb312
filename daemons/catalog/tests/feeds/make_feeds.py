#!/usr/bin/env python3
"""Writes the binary feeds of the corpus (non-UTF-8 encodings) from their text.

Run from this directory: python3 make_feeds.py. The text feeds are kept as they are.
"""


def intl(decl):
    d = f'<?xml version="1.0" encoding="{decl}"?>\n' if decl else ''
    return d + '''<rss version="2.0"><channel><title>Intl</title><link>http://intl.example/</link><description>d</description>
<item><title>Café crème — ☕ 1</title><guid>intl-1</guid><pubDate>Tue, 02 Jan 2024 10:00:00 GMT</pubDate><enclosure url="http://media.example/intl/1.mp3" type="audio/mpeg" length="1"/></item>
</channel></rss>
'''


def latin(decl):
    d = f'<?xml version="1.0" encoding="{decl}"?>\n' if decl else ''
    return d + '''<rss version="2.0"><channel><title>Latin</title><link>http://latin.example/</link><description>d</description>
<item><title>Café crème à la carte</title><guid>latin-1</guid><pubDate>Tue, 02 Jan 2024 10:00:00 GMT</pubDate><enclosure url="http://media.example/latin/1.mp3" type="audio/mpeg" length="1"/></item>
</channel></rss>
'''


def russian(decl, n):
    d = f'<?xml version="1.0" encoding="{decl}"?>\n' if decl else ''
    return d + f'''<rss version="2.0"><channel><title>Ru</title><link>http://ru.example/</link><description>d</description>
<item><title>Привет, мир</title><guid>ru-{n}</guid><pubDate>Tue, 02 Jan 2024 10:00:00 GMT</pubDate><enclosure url="http://media.example/ru/{n}.mp3" type="audio/mpeg" length="1"/></item>
</channel></rss>
'''


def write(name, data):
    with open(name, 'wb') as f:
        f.write(data)


write('utf-16be-declared-utf-16.xml', intl('utf-16').encode('utf-16-be'))
write('utf-16be-declared-ucs-2.xml', intl('ucs-2').encode('utf-16-be'))
write('utf-16le-bom.xml', b'\xff\xfe' + intl('UTF-16').encode('utf-16-le'))
write('utf-32be.xml', intl('UTF-32').encode('utf-32-be'))
write('utf-32le-bom.xml', b'\xff\xfe\x00\x00' + intl('UTF-32').encode('utf-32-le'))
write('utf-8-bom.xml', b'\xef\xbb\xbf' + intl('utf-8').encode('utf-8'))
write('windows-1252-http-charset-only.xml', latin(None).encode('cp1252'))
write('iso-8859-1-declared.xml', latin('ISO-8859-1').encode('latin-1'))
write('koi8-r-declared.xml', russian('KOI8-R', 1).encode('koi8-r'))
write('koi8-r-http-charset-only.xml', russian(None, 2).encode('koi8-r'))
