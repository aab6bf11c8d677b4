"""An XML Spreadsheet 2003 file, as report tools export it under an .xls name, reads as a workbook's records."""

import pytest

from models.errors import DataError
from pipeline.retrieval.archives import DocumentText
from pipeline.retrieval.documents import read_document

TICKET_EXPORT = """\
<?xml version="1.0"?>
<?mso-application progid="Excel.Sheet"?>
<Workbook xmlns="urn:schemas-microsoft-com:office:spreadsheet" xmlns:o="urn:schemas-microsoft-com:office:office"
 xmlns:x="urn:schemas-microsoft-com:office:excel" xmlns:ss="urn:schemas-microsoft-com:office:spreadsheet"
 xmlns:html="http://www.w3.org/TR/REC-html40">
 <DocumentProperties xmlns="urn:schemas-microsoft-com:office:office"><Title>Ticket export</Title></DocumentProperties>
 <Worksheet ss:Name="Tickets">
  <Table>
   <Row><Cell><Data ss:Type="String">Ticket</Data></Cell><Cell><Data ss:Type="String">Opened</Data></Cell>
    <Cell><Data ss:Type="String">Summary</Data></Cell><Cell><Data ss:Type="String">Hours</Data></Cell></Row>
   <Row><Cell><Data ss:Type="Number">101</Data></Cell><Cell><Data ss:Type="DateTime">2024-03-01T00:00:00.000</Data>
    </Cell><Cell><ss:Data ss:Type="String" xmlns="http://www.w3.org/TR/REC-html40"><B>Refund</B> not received</ss:Data>
    </Cell><Cell><Data ss:Type="Number">1.5</Data></Cell></Row>
   <Row><Cell ss:MergeAcross="1"><Data ss:Type="Number">102.0</Data></Cell><Cell><Data ss:Type="String">Damaged item
    </Data></Cell><Cell ss:Index="4"><Data ss:Type="Number">2</Data></Cell></Row>
   <Row><Cell><Data ss:Type="Number">103</Data></Cell><Cell ss:Index="3"><Data ss:Type="String">Late</Data></Cell></Row>
  </Table>
 </Worksheet>
 <Worksheet ss:Name="Lookup">
  <Table><Row><Cell><Data ss:Type="String">internal codes</Data></Cell></Row></Table>
  <WorksheetOptions xmlns="urn:schemas-microsoft-com:office:excel"><Visible>SheetHidden</Visible></WorksheetOptions>
 </Worksheet>
</Workbook>
"""


def test_an_xml_spreadsheet_named_xls_reads_as_the_workbooks_records(tmp_path):
    path = tmp_path / "tickets.xls"
    path.write_text(TICKET_EXPORT, encoding="utf-8")
    assert read_document(path) == ("Ticket export", (
        "Ticket: 101\nOpened: 2024-03-01\nSummary: Refund not received\nHours: 1.5\n\x1e\n"  # formatted runs joined
        "Ticket: 102\nSummary: Damaged item\nHours: 2\n\x1e\n"  # merged across Opened; Index places the hours
        "Ticket: 103\nSummary: Late"))  # the hidden sheet left out
    assert DocumentText.read(path).suffix == ".xls"  # its chunks are records
    renamed = tmp_path / "tickets.xlsx"
    renamed.write_text(TICKET_EXPORT, encoding="utf-8")
    assert read_document(renamed)[0] == "Ticket export"


@pytest.mark.parametrize(("content", "error"), [
    ('<?xml version="1.0"?><?mso-application progid="Excel.Sheet"?><Workbook><Row>', "not well-formed XML"),
    ('<?xml version="1.0"?><?mso-application progid="Excel.Sheet"?><Sheet/>', "not an XML Spreadsheet 2003 workbook"),
    ('<?xml version="1.0"?><!-- progid="Excel.Sheet" -->' + "<a>" * 300 + "</a>" * 300, "nests elements more than"),
])
def test_broken_xml_spreadsheets_are_errors_naming_the_file(tmp_path, content, error):
    path = tmp_path / "export.xls"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=rf"export\.xls.*{error}"):
        read_document(path)
